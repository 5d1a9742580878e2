// Elementwise f32: the residual add of a decoder layer, out = a + b, and the
// scale x ← s·x (Gemma's embedding times √hidden).

@unmanaged class AddArgs {
  a: usize;
  b: usize;
  out: usize;
  n: i32;
  /** Elements per work item (a multiple of 4). */
  chunk: i32;
}

export function task_add(item: i32, tid: i32, args: usize): void {
  const a = changetype<AddArgs>(args);
  const i0 = item * a.chunk;
  const i1 = min(a.n, i0 + a.chunk);
  let i = i0;
  for (; i + 4 <= i1; i += 4) {
    const o = <usize>i << 2;
    v128.store(a.out + o, f32x4.add(v128.load(a.a + o), v128.load(a.b + o)));
  }
  for (; i < i1; i++) {
    const o = <usize>i << 2;
    store<f32>(a.out + o, load<f32>(a.a + o) + load<f32>(a.b + o));
  }
}

@unmanaged class ScaleArgs {
  x: usize;
  n: i32;
  /** Elements per work item (a multiple of 4). */
  chunk: i32;
  s: f32;
}

export function task_scale(item: i32, tid: i32, args: usize): void {
  const a = changetype<ScaleArgs>(args);
  const i0 = item * a.chunk;
  const i1 = min(a.n, i0 + a.chunk);
  const s = f32x4.splat(a.s);
  let i = i0;
  for (; i + 4 <= i1; i += 4) {
    const o = a.x + (<usize>i << 2);
    v128.store(o, f32x4.mul(v128.load(o), s));
  }
  for (; i < i1; i++) {
    const o = a.x + (<usize>i << 2);
    store<f32>(o, load<f32>(o) * a.s);
  }
}
