// The import graph of the TypeScript sources under src/, read with the TypeScript compiler's own
// parser (a devDependency already; no program or type check, so it takes well under a second):
// what the package-shape tests (test/package/) walk. Like madge or dependency-cruiser, but
// counting type-only edges too, since `import type` cycles and reaches are what they pin down.
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import ts from "typescript";

/** How a file reaches another: a static import or re-export (type-only ones included), or at run time (a dynamic `import("…")`, a `new URL("…", import.meta.url)` such as a worker or loader module). */
export type EdgeKind = "static" | "runtime";

export interface ImportEdge {
  /** Repository-relative .ts path of the target, e.g. "src/sources/source.ts". */
  to: string;
  kind: EdgeKind;
  /** `import type …` / `export type … from` (the whole declaration; erased from the JavaScript). */
  typeOnly: boolean;
}

/** Every .ts file under `dir` (repository-relative, sorted), skipping .d.ts. */
export function sourceFiles(root: string, dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(join(root, d), { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** A relative specifier ("./x.js", "../y/index.js") as the repository-relative .ts file it names; null for a package. */
function target(from: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  return join(dirname(from), spec).replace(/\.js$/, ".ts");
}

/** The edges out of one source file: import / export … from (type-only included), `import("…")` types, dynamic imports and import.meta.url URLs. */
export function importsOf(root: string, file: string): ImportEdge[] {
  const sf = ts.createSourceFile(file, readFileSync(join(root, file), "utf8"), ts.ScriptTarget.Latest, true);
  const edges: ImportEdge[] = [];
  const add = (spec: string, kind: EdgeKind, typeOnly = false): void => {
    const to = target(file, spec);
    if (to !== null && to.endsWith(".ts")) edges.push({ to, kind, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const typeOnly = ts.isImportDeclaration(node) ? node.importClause?.isTypeOnly === true : node.isTypeOnly;
      add(node.moduleSpecifier.text, "static", typeOnly);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, "static", true);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      add(node.arguments[0].text, "runtime");
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === "URL") {
      const [spec, base] = node.arguments ?? [];
      if (spec && ts.isStringLiteral(spec) && base && base.getText(sf) === "import.meta.url") add(spec.text, "runtime");
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return edges;
}

/** The graph of every .ts file under `dir`: file → its edges (to files that exist under root). */
export function importGraph(root: string, dir = "src"): Map<string, ImportEdge[]> {
  const files = sourceFiles(root, dir);
  const known = new Set(files);
  const graph = new Map<string, ImportEdge[]>();
  for (const f of files) graph.set(f, importsOf(root, f).filter((e) => known.has(e.to)));
  return graph;
}

/**
 * The cycles of the static edges, one per strongly connected component of more than one file
 * (or a file importing itself), each as the files of the component in a path order that closes
 * (Tarjan's algorithm for the components, then a walk inside one for the readable path).
 */
export function staticCycles(graph: Map<string, ImportEdge[]>): string[][] {
  const next = (f: string): string[] => [...new Set((graph.get(f) ?? []).filter((e) => e.kind === "static").map((e) => e.to))];
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let counter = 0;
  const strong = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1 || next(v).includes(v)) components.push(c);
    }
  };
  for (const f of graph.keys()) if (!index.has(f)) strong(f);
  return components.map((c) => cyclePath(c, next));
}

/** One cycle through a strongly connected component, from its first file (sorted) back to it, by breadth-first search. */
function cyclePath(component: string[], next: (f: string) => string[]): string[] {
  const inside = new Set(component);
  const start = [...component].sort()[0]!;
  const from = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of next(v)) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(from.get(path[0]!)!);
        return [...path, start];
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** The files reachable from `entries` over every edge kind (static and run-time). */
export function reachable(graph: Map<string, ImportEdge[]>, entries: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...entries];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const e of graph.get(f) ?? []) todo.push(e.to);
  }
  return seen;
}

/** The names an entry module exports (`export { … } from`, `export *` followed into its module, local `export` declarations), sorted. */
export function exportedNames(root: string, file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(join(root, file), "utf8"), ts.ScriptTarget.Latest, true);
  const names = new Set<string>();
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st)) {
      if (st.exportClause && ts.isNamedExports(st.exportClause)) for (const el of st.exportClause.elements) names.add(el.name.text);
      else if (!st.exportClause && st.moduleSpecifier && ts.isStringLiteral(st.moduleSpecifier)) {
        for (const n of exportedNames(root, target(file, st.moduleSpecifier.text)!)) names.add(n);
      }
    } else if (ts.canHaveModifiers(st) && ts.getModifiers(st)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      if (ts.isVariableStatement(st)) for (const d of st.declarationList.declarations) names.add(d.name.getText(sf));
      else if ("name" in st && st.name && ts.isIdentifier(st.name as ts.Node)) names.add((st.name as ts.Identifier).text);
    }
  }
  return [...names].sort();
}

/** The repository root of a compiled test (dist/test/<dir>/x.test.js → the checkout). */
export function repoRoot(testUrl: string): string {
  return resolve(dirname(new URL(testUrl).pathname), "../../..");
}
