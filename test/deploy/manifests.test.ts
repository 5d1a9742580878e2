// deploy/ cannot run here (no Docker engine, no cluster), so its files are parsed and cross-checked
// against the server itself: every flag the manifests pass is one `kvflash serve` parses, every
// probe path and port is one the running server answers on, the shutdown budget covers the drain,
// and every metric the Gateway API Inference Extension's endpoint picker and the HPA read exists
// under the name and type they expect, in the /metrics of a live server.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { parseServeArgs } from "../../src/cli/serve-args.js";
import { type RunningServer, serve } from "../../src/server/start-server.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const DEPLOY = join(ROOT, "deploy");

/** A parsed YAML document: shapes are checked by the assertions that read it. */
type Doc = Record<string, any>;

function docs(relDir: string): Doc[] {
  const out: Doc[] = [];
  for (const f of readdirSync(join(DEPLOY, relDir)).filter((f) => f.endsWith(".yaml"))) {
    for (const d of parseAllDocuments(readFileSync(join(DEPLOY, relDir, f), "utf8"))) {
      assert.deepEqual(d.errors, [], `${relDir}/${f} parses`);
      out.push(d.toJS() as Doc);
    }
  }
  return out;
}

const k8s = docs("kubernetes");
const gateway = docs("gateway");
const byKind = (all: Doc[], kind: string): Doc => {
  const d = all.find((x) => x["kind"] === kind);
  assert.ok(d, `a ${kind} manifest`);
  return d;
};
const deployment = byKind(k8s, "Deployment");
const container = deployment["spec"]["template"]["spec"]["containers"][0] as Doc;
const args = container["args"] as string[];
const flag = (name: string): string => {
  const i = args.indexOf(name);
  assert.ok(i >= 0 && i + 1 < args.length, `the Deployment passes ${name}`);
  return args[i + 1]!;
};

/** The Prometheus text of a live server on the embedded default model. */
let server: RunningServer;
let metricsText = "";
before(async () => {
  server = await serve({ port: 0, threads: 1 });
  await server.ready;
  metricsText = await (await fetch(`${server.url}/metrics`)).text();
});
after(() => server.close());

function metricType(name: string): string | undefined {
  return new RegExp(`^# TYPE ${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} (\\w+)$`, "m").exec(metricsText)?.[1];
}

function metricLabels(name: string): string[] {
  const line = metricsText.split("\n").find((l) => l.startsWith(`${name}{`));
  assert.ok(line, `a sample of ${name}`);
  return [...line.slice(name.length + 1, line.lastIndexOf("}")).matchAll(/(\w+)="/g)].map((m) => m[1]!).sort();
}

test("the Deployment's container arguments are a command line `kvflash serve` accepts", () => {
  assert.equal(args[0], "serve");
  const parsed = parseServeArgs(args.slice(1), {});
  assert.equal(parsed.host, "0.0.0.0", "listens beyond loopback in a pod");
  assert.equal(parsed.port, Number(flag("--port")));
});

test("ports agree: container port, Service target, InferencePool target, --port", () => {
  const port = Number(flag("--port"));
  const http = (container["ports"] as Doc[]).find((p) => p["name"] === "http");
  assert.equal(http?.["containerPort"], port);
  const service = byKind(k8s, "Service");
  const sp = (service["spec"]["ports"] as Doc[])[0]!;
  assert.equal(sp["targetPort"], "http");
  assert.deepEqual(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]);
  const pool = byKind(gateway, "InferencePool");
  assert.deepEqual(pool["spec"]["targetPorts"], [{ number: port }]);
  assert.deepEqual(pool["spec"]["selector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"]);
  const route = byKind(gateway, "HTTPRoute");
  assert.equal(route["spec"]["rules"][0]["backendRefs"][0]["name"], pool["metadata"]["name"]);
});

test("every probe asks a path the server answers 200 on once loaded, on the named port", async () => {
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const get = container[probe]?.["httpGet"] as Doc | undefined;
    assert.ok(get, `${probe} is an HTTP GET`);
    assert.equal(get["port"], "http");
    const res = await fetch(`${server.url}${get["path"]}`);
    assert.equal(res.status, 200, `${probe} ${get["path"]}`);
  }
  // The startup probe waits long enough for a load: at least 5 minutes.
  const startup = container["startupProbe"] as Doc;
  assert.ok(startup["periodSeconds"] * startup["failureThreshold"] >= 300);
});

test("terminationGracePeriodSeconds covers preStop plus --shutdown-timeout", () => {
  const pre = container["lifecycle"]["preStop"]["exec"]["command"] as string[];
  assert.equal(pre[0], "sleep");
  const grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] as number;
  assert.ok(grace >= Number(pre[1]) + Number(flag("--shutdown-timeout")), `grace ${grace} s`);
});

test("the ServiceMonitor scrapes the Service's port at a path that serves Prometheus text", async () => {
  const sm = byKind(k8s, "ServiceMonitor");
  const ep = (sm["spec"]["endpoints"] as Doc[])[0]!;
  assert.equal(ep["port"], (byKind(k8s, "Service")["spec"]["ports"] as Doc[])[0]!["name"]);
  const res = await fetch(`${server.url}${ep["path"]}`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
});

// The Gateway API Inference Extension's model server protocol (docs/proposals/003-model-server-protocol
// in kubernetes-sigs/gateway-api-inference-extension), with vLLM's names, which the endpoint picker
// reads when modelServerType is vllm.
const GIE_METRICS: Array<{ name: string; type: string; labels?: string[] }> = [
  { name: "vllm:num_requests_waiting", type: "gauge" }, // TotalQueuedRequests
  { name: "vllm:num_requests_running", type: "gauge" }, // TotalRunningRequests
  { name: "vllm:kv_cache_usage_perc", type: "gauge" }, // KVCacheUtilization
  { name: "vllm:lora_requests_info", type: "gauge", labels: ["max_lora", "running_lora_adapters", "waiting_lora_adapters"] },
  { name: "vllm:cache_config_info", type: "gauge", labels: ["block_size", "num_gpu_blocks"] }, // BlockSize, NumGPUBlocks
];

test("every metric the endpoint picker reads exists with its name, type and labels", () => {
  for (const m of GIE_METRICS) {
    assert.equal(metricType(m.name), m.type, m.name);
    if (m.labels) for (const l of m.labels) assert.ok(metricLabels(m.name).includes(l), `${m.name} has label ${l}`);
  }
  // No adapters: empty lists, and the value is the last update's Unix time.
  assert.match(metricsText, /^vllm:lora_requests_info\{running_lora_adapters="",max_lora="0",waiting_lora_adapters=""\} \d{10}/m);
});

test("the HPA's metric is the adapter's name for a gauge the server exports", () => {
  const hpa = byKind(k8s, "HorizontalPodAutoscaler");
  const metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] as string;
  const adapter = parseYaml(byKind(k8s, "ConfigMap")["data"]["config.yaml"]) as Doc;
  const rule = (adapter["rules"] as Doc[]).find((r) => r["name"]["as"] === metric);
  assert.ok(rule, `an adapter rule names ${metric}`);
  const series = /^([\w:]+)\{/.exec(rule["seriesQuery"] as string)![1]!;
  assert.equal(metricType(series), "gauge", series);
  assert.equal(hpa["spec"]["scaleTargetRef"]["name"], deployment["metadata"]["name"]);
});

test("the endpoint picker config declares every plugin its profile uses", () => {
  const cm = gateway.find((d) => d["kind"] === "ConfigMap")!;
  const epp = parseYaml(cm["data"]["epp-config.yaml"]) as Doc;
  assert.equal(epp["kind"], "EndpointPickerConfig");
  const declared = new Set((epp["plugins"] as Doc[]).map((p) => p["name"] ?? p["type"]));
  for (const profile of epp["schedulingProfiles"] as Doc[]) for (const p of profile["plugins"] as Doc[]) assert.ok(declared.has(p["pluginRef"]), p["pluginRef"]);
  assert.ok(declared.has("prefix-cache-scorer") && declared.has("queue-scorer") && declared.has("kv-cache-utilization-scorer"));
});

test("the container file: non-root, a HEALTHCHECK on /health, the port and a command serve accepts, the package's files", () => {
  const text = readFileSync(join(DEPLOY, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
  const final = text.slice(text.lastIndexOf("\nFROM "));
  assert.match(final, /^USER (?!root)\w+/m);
  assert.match(final, /^HEALTHCHECK .*\/health/m);
  assert.match(final, new RegExp(`^EXPOSE ${flag("--port")}$`, "m"));
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(final)![1]!) as string[];
  assert.equal(cmd[0], "serve");
  parseServeArgs(cmd.slice(1), {});
  assert.match(final, /^VOLUME \["\/data\/hf"\]$/m);
  assert.match(final, /HF_HOME=\/data\/hf/);
  // The runtime stage copies what the published package holds (package.json "files").
  const files = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { files: string[] }).files;
  for (const f of files) assert.ok(final.includes(f.replace(/^build\//, "")), `the runtime stage copies ${f}`);
});

test("the HAProxy recipe checks /health and hashes the request body", () => {
  const cfg = readFileSync(join(DEPLOY, "haproxy", "haproxy.cfg"), "utf8");
  assert.match(cfg, /^\s*option httpchk GET \/health$/m);
  assert.match(cfg, /^\s*balance hash req\.body/m);
  assert.match(cfg, /^\s*hash-type consistent$/m);
  assert.match(cfg, /^\s*retry-on conn-failure 503$/m);
});
