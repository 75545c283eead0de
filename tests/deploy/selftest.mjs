#!/usr/bin/env node
// Proves that check_manifests.mjs can fail: copies deploy/kubernetes, docs/reference/settings.md and the Dockerfile into a temporary
// directory, breaks the copy in one way at a time, and expects check_manifests.mjs to exit 1 with a message that
// names the problem. The unbroken copy must pass. Nothing in the repository is touched.
//
//   node tests/deploy/selftest.mjs [-v]       (-v: print the checker's output for every case)
//
// A breakage whose text is no longer in the manifests fails too (update the case with the manifests).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const verbose = process.argv.includes("-v");
const sluiceBin = path.join(repo, "build", "sluice");

// Each case: files to change (path relative to the temporary root: kubernetes/…, settings.md, Dockerfile) as
// [from, to] replacements (the first occurrence, or every one with `all`), files to add or delete, and the text
// the checker's output must contain.
const cases = [
  { name: "wrong container port", edit: { "kubernetes/memory/deployment.yaml": [["containerPort: 8081", "containerPort: 8082"]] },
    expect: "containerPort 8082 is none of the ports Sluice listens on" },
  { name: "misspelled env name", edit: { "kubernetes/memory/deployment.yaml": [["- name: LOG_FORMAT", "- name: LOG_FROMAT"]] },
    expect: "LOG_FROMAT is not a setting:" },
  { name: "schema error (replicas: \"x\")", edit: { "kubernetes/memory/deployment.yaml": [[/replicas: 1\b.*/, 'replicas: "x"']] },
    expect: "spec.replicas: schema: must be integer" },
  { name: "unknown field (a misspelled probe)", edit: { "kubernetes/redis/deployment.yaml": [["readinessProbe:", "readinesProbe:"]] },
    expect: 'unknown field "readinesProbe"' },
  { name: "YAML 1.1 boolean as an env value", edit: { "kubernetes/redis/deployment.yaml": [[/(name: RUNTIME_WATCH_ROOT\n\s*value: )"false"/, "$1no"]] },
    expect: "env[RUNTIME_WATCH_ROOT].value: schema: must be string" },
  { name: "YAML syntax error", edit: { "kubernetes/memory/service.yaml": [["  type: ClusterIP", "  type: ClusterIP\n   selector: {"]] },
    expect: "YAML:" },
  { name: "probe on the wrong path", edit: { "kubernetes/memory/deployment.yaml": [["path: /healthcheck", "path: /healthz"]] },
    expect: "path /healthz: expected /healthcheck" },
  { name: "probe on the gRPC port", edit: { "kubernetes/redis/deployment.yaml": [[/(livenessProbe:\n\s*httpGet:\n\s*path: \/healthcheck\n\s*port: )http/, "$1grpc"]] },
    expect: "is 8081: expected the HTTP port 8080" },
  { name: "command differs from ENTRYPOINT", edit: { Dockerfile: [['ENTRYPOINT ["/bin/ratelimit"]', 'ENTRYPOINT ["/bin/sluice"]']] },
    expect: "differs from the Dockerfile's ENTRYPOINT" },
  { name: "Dockerfile missing", remove: ["Dockerfile"], expect: "Dockerfile not found" },
  { name: "setting not on the settings page", edit: { "settings.md": [["`MEMORY_MAX_COUNTERS`", "MEMORY_MAX_COUNTERS", "all"]] },
    expect: "MEMORY_MAX_COUNTERS is not a setting:" },
  { name: "writable root file system", edit: { "kubernetes/memory/deployment.yaml": [["readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"]] },
    expect: "readOnlyRootFilesystem must be true" },
  { name: "capabilities not dropped", edit: { "kubernetes/redis/deployment.yaml": [["drop: [ALL]", "drop: [NET_RAW]"]] },
    expect: "capabilities.drop must include ALL" },
  { name: "service links left on", edit: { "kubernetes/sidecar/deployment.yaml": [["enableServiceLinks: false", "enableServiceLinks: true"]] },
    expect: "enableServiceLinks must be false" },
  { name: "snapshot folder not mounted", edit: { "kubernetes/memory/deployment.yaml": [["mountPath: /var/lib/sluice", "mountPath: /var/lib/sluice2"]] },
    expect: "no volume mounted at /var/lib/sluice (MEMORY_SNAPSHOT_FILE's folder)" },
  { name: "rules mounted elsewhere", edit: { "kubernetes/memory/deployment.yaml": [["mountPath: /data/ratelimit/config", "mountPath: /data/ratelimit/rules"]] },
    expect: "no volume mounted at /data/ratelimit/config" },
  { name: "rules without a domain", edit: { "kubernetes/memory/configmap.yaml": [["domain: example", "domian: example"]] },
    expect: "example.yaml has no `domain`" },
  { name: "rules key not .yaml", edit: { "kubernetes/redis/configmap.yaml": [["  example.yaml: |", "  example.txt: |"]] },
    expect: "key example.txt: a rule file's name must end in .yaml" },
  { name: "Service targets a missing port", edit: { "kubernetes/memory/service.yaml": [["targetPort: grpc", "targetPort: grcp"]] },
    expect: 'targetPort "grcp" is no container port' },
  { name: "Service exposes the debug server", edit: { "kubernetes/redis/service.yaml": [["targetPort: http", "targetPort: debug"]] },
    expect: "exposes Sluice's debug server" },
  { name: "gRPC Service port without h2c", edit: { "kubernetes/redis/service.yaml": [[/\s*appProtocol: kubernetes\.io\/h2c.*/, ""]] },
    expect: "gRPC port without appProtocol: kubernetes.io/h2c" },
  { name: "Service selects nothing", edit: { "kubernetes/redis/service.yaml": [["app.kubernetes.io/instance: sluice\n  ports", "app.kubernetes.io/instance: sluicee\n  ports"]] },
    expect: "selects no workload's pods" },
  { name: "port name used by two containers", edit: { "kubernetes/sidecar/deployment.yaml": [["- name: proxy", "- name: http"], [/port: proxy/g, "port: http"]], "kubernetes/sidecar/service.yaml": [["targetPort: proxy", "targetPort: http"]] },
    expect: "port name http is also a port of container envoy" },
  { name: "PDB blocks drains", edit: { "kubernetes/memory/pdb.yaml": [[/^  maxUnavailable: 1$/m, "  minAvailable: 1"]] },
    expect: "allows 0 disruptions" },
  { name: "memory backend with 3 replicas", edit: { "kubernetes/memory/deployment.yaml": [[/replicas: 1\b.*/, "replicas: 3"]] },
    expect: "BACKEND_TYPE=memory with 3 replicas" },
  { name: "unknown kind", add: { "kubernetes/memory/hpa.yaml": "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: sluice\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: sluice}\n  maxReplicas: 3\n" },
    expect: "no model for apiVersion \"autoscaling/v2\" kind \"HorizontalPodAutoscaler\"" },
  { name: "kustomization lists a missing file", edit: { "kubernetes/memory/kustomization.yaml": [["- pdb.yaml", "- pdb-missing.yaml"]] },
    expect: "resources: pdb-missing.yaml does not exist" },
  { name: "Envoy calls the wrong port", edit: { "kubernetes/sidecar/envoy-config.yaml": [["port_value: 8081", "port_value: 8082"]] },
    expect: "calls 127.0.0.1:8082" },
  { name: "Envoy cluster without HTTP/2", edit: { "kubernetes/sidecar/envoy-config.yaml": [["http2_protocol_options: {}", "http_protocol_options: {}"]] },
    expect: "does not speak HTTP/2" },
  { name: "Envoy filter on another domain", edit: { "kubernetes/sidecar/envoy-config.yaml": [["domain: example", "domain: exmaple"]] },
    expect: "ratelimit filter domain exmaple is in no rules ConfigMap" },
  { name: "rules Sluice refuses (check-config)", needs: sluiceBin,
    edit: { "kubernetes/redis/configmap.yaml": [["requests_per_unit: 5", "requests_per_unit: five"]] },
    expect: "sluice check-config:" },
];

function copy(from, to) {
  fs.cpSync(from, to, { recursive: true });
}

// Without a Dockerfile in the repository (check_manifests.mjs then fails on it), the copies get a stand-in with
// upstream's ENTRYPOINT, so that every other case still runs.
const STAND_IN_DOCKERFILE = 'FROM scratch\nENTRYPOINT ["/bin/ratelimit"]\n';
const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-manifests-selftest-"));
function layOut(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  copy(path.join(repo, "deploy", "kubernetes"), path.join(dir, "kubernetes"));
  copy(path.join(repo, "docs", "reference", "settings.md"), path.join(dir, "settings.md"));
  if (fs.existsSync(path.join(repo, "Dockerfile"))) copy(path.join(repo, "Dockerfile"), path.join(dir, "Dockerfile"));
  else fs.writeFileSync(path.join(dir, "Dockerfile"), STAND_IN_DOCKERFILE);
}
function runChecker(dir, extra = []) {
  const r = spawnSync(process.execPath, [path.join(here, "check_manifests.mjs"),
    "--manifests", path.join(dir, "kubernetes"), "--settings", path.join(dir, "settings.md"),
    "--dockerfile", path.join(dir, "Dockerfile"), ...extra], { encoding: "utf8", env: process.env });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

let passed = 0;
let failed = 0;
function report(ok, name, detail) {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"}  selftest: ${name}${detail ? `: ${detail}` : ""}`);
}

try {
  const dir = path.join(root, "case");
  // The unbroken copy passes.
  layOut(dir);
  const base = runChecker(dir, ["--sluice", ""]);
  const standIn = fs.existsSync(path.join(repo, "Dockerfile")) ? "" : "with a stand-in Dockerfile (the repository has none)";
  report(base.status === 0, "unbroken copy passes", base.status === 0 ? standIn : `exit ${base.status}\n${base.out}`);
  if (verbose) console.log(base.out);

  for (const c of cases) {
    if (c.needs && !fs.existsSync(c.needs)) {
      console.log(`skip  selftest: ${c.name} (${c.needs} not built)`);
      continue;
    }
    layOut(dir);
    let applied = true;
    for (const [file, edits] of Object.entries(c.edit || {})) {
      const p = path.join(dir, file);
      if (!fs.existsSync(p)) {
        applied = false;
        continue;
      }
      let text = fs.readFileSync(p, "utf8");
      for (const [from, to, all] of edits) {
        const before = text;
        text = all ? text.split(from).join(to) : text.replace(from, to);
        if (text === before) applied = false;
      }
      fs.writeFileSync(p, text);
    }
    for (const [file, text] of Object.entries(c.add || {})) fs.writeFileSync(path.join(dir, file), text);
    for (const file of c.remove || []) fs.rmSync(path.join(dir, file), { force: true });
    if (!applied) {
      report(false, c.name, "the text to break is no longer in the manifests: update this case");
      continue;
    }
    const r = runChecker(dir, c.needs ? ["--sluice", c.needs] : ["--sluice", ""]);
    const caught = r.status === 1 && r.out.includes(c.expect);
    const line = r.out.split("\n").find((l) => l.includes(c.expect));
    report(caught, c.name, caught ? line.trim().replace(/^- /, "").replaceAll(`${dir}/`, "") : `exit ${r.status}, expected a failure with "${c.expect}":\n${r.out}`);
    if (verbose) console.log(r.out);
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
console.log(`selftest: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
