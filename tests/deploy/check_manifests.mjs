#!/usr/bin/env node
// Checks the Kubernetes manifests under deploy/kubernetes/ (Node.js 20+, ES module).
//
//   node tests/deploy/check_manifests.mjs [--manifests DIR] [--settings FILE] [--dockerfile FILE] [--sluice BIN]
//
// Defaults are the repository's: deploy/kubernetes, docs/reference/settings.md, Dockerfile, build/sluice. tests/deploy/run.sh
// installs the npm packages first (kubernetes-models, yaml) and runs this script.
//
// 1. Every *.yaml file parses (as Kubernetes parses it: YAML 1.1 booleans, duplicate keys refused), and every
//    object is valid against the Kubernetes API schemas of kubernetes-models, with unknown fields refused (as
//    `kubectl apply --validate=strict`). A kind this script has no model for is a failure, so nothing escapes.
//    kustomization.yaml files are not API objects: their `resources` must exist instead.
// 2. Every Sluice container (image `…/sluice…`) agrees with the image and the settings page: command = the Dockerfile's
//    ENTRYPOINT; container ports = the ports its env makes Sluice listen on; every env name is a setting docs/reference/settings.md
//    documents (`NAME`); probes are httpGet /healthcheck on the HTTP port; non-root, read-only root file system,
//    all capabilities dropped, no privilege escalation; the rules ConfigMap is mounted read-only at
//    RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY and holds YAML rule files with a `domain` (loaded by
//    `sluice check-config` too when the binary is there).
// 3. Services and PodDisruptionBudgets select pods of a workload in the same folder and name ports that exist;
//    an Envoy bootstrap in a ConfigMap points its rate limit filter at Sluice's gRPC port over HTTP/2.
//
// Prints one line per check group, then problems as `file:line: Kind/name: field: message`, and a closing line
// `manifests: N passed, M failed` (check groups). Exit status 0 only when every group passed.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");

// ---------------------------------------------------------------------------------------------------------------
// Arguments and npm packages

const usage = `usage: node check_manifests.mjs [--manifests DIR] [--settings FILE] [--dockerfile FILE] [--sluice BIN]
  --manifests DIR    the manifests (default: ${path.join(repo, "deploy", "kubernetes")})
  --settings FILE    the settings reference, every setting (default: ${path.join(repo, "docs/reference/settings.md")})
  --dockerfile FILE  the image's Dockerfile (default: ${path.join(repo, "Dockerfile")})
  --sluice BIN       run \`BIN check-config\` on the rules ConfigMaps (default: ${path.join(repo, "build", "sluice")}
                     when it exists; --sluice "" skips it)
The npm packages are looked up in $SLUICE_NPM_DIR (default: ${path.join(here, "node_modules")}); run.sh installs them.`;

let opts;
try {
  opts = parseArgs({
    options: {
      manifests: { type: "string", default: path.join(repo, "deploy", "kubernetes") },
      settings: { type: "string", default: path.join(repo, "docs", "reference", "settings.md") },
      dockerfile: { type: "string", default: path.join(repo, "Dockerfile") },
      sluice: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: false,
  }).values;
} catch (e) {
  console.error(`check_manifests: ${e.message}\n${usage}`);
  process.exit(2);
}
if (opts.help) {
  console.log(usage);
  process.exit(0);
}
const manifestsDir = path.resolve(opts.manifests);
const settingsPath = path.resolve(opts.settings);
// A path relative to the repository when inside it, else absolute.
const display = (p) => (path.relative(repo, p).startsWith("..") ? p : path.relative(repo, p));
const dockerfilePath = path.resolve(opts.dockerfile);

// SLUICE_NPM_DIR is the node_modules directory (or a directory holding one), as in run.sh.
function nodeModulesDir() {
  let dir = path.resolve(process.env.SLUICE_NPM_DIR || path.join(here, "node_modules"));
  if (path.basename(dir) !== "node_modules") dir = path.join(dir, "node_modules");
  return dir;
}
const npmDir = nodeModulesDir();
const requireFromNpmDir = createRequire(path.join(path.dirname(npmDir), "check_manifests.cjs"));
let YAML, models, modelsVersion;
try {
  YAML = requireFromNpmDir("yaml");
  models = {
    v1: requireFromNpmDir("kubernetes-models/v1"),
    appsV1: requireFromNpmDir("kubernetes-models/apps/v1"),
    policyV1: requireFromNpmDir("kubernetes-models/policy/v1"),
    networkingV1: requireFromNpmDir("kubernetes-models/networking.k8s.io/v1"),
  };
  modelsVersion = requireFromNpmDir("kubernetes-models/package.json").version;
} catch (e) {
  console.error(`check_manifests: cannot load the npm packages from ${npmDir}: ${e.message.split("\n")[0]}`);
  console.error("Install them with tests/deploy/run.sh (npm ci), or set SLUICE_NPM_DIR to where they are.");
  process.exit(2);
}

// apiVersion + kind -> model class. Only kinds the checks below understand: add a kind here (and to the checks,
// if it runs Sluice) to use it in deploy/kubernetes/.
const MODELS = new Map([
  ["v1/ConfigMap", models.v1.ConfigMap],
  ["v1/Service", models.v1.Service],
  ["v1/ServiceAccount", models.v1.ServiceAccount],
  ["apps/v1/Deployment", models.appsV1.Deployment],
  ["apps/v1/StatefulSet", models.appsV1.StatefulSet],
  ["apps/v1/DaemonSet", models.appsV1.DaemonSet],
  ["policy/v1/PodDisruptionBudget", models.policyV1.PodDisruptionBudget],
  ["networking.k8s.io/v1/NetworkPolicy", models.networkingV1.NetworkPolicy],
]);
const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet"]);

// ---------------------------------------------------------------------------------------------------------------
// Reporting: one group per kind of check; each problem names file:line, object and field.

const groups = [];
let current = null;
function group(name) {
  current = { name, checks: 0, problems: [], notes: [] };
  groups.push(current);
  return current;
}
function pass() {
  current.checks++;
}
function fail(where, message) {
  current.checks++;
  current.problems.push(where ? `${where}: ${message}` : message);
}
function check(cond, where, message) {
  if (cond) pass();
  else fail(where, message);
  return cond;
}
function note(text) {
  current.notes.push(text);
}

// A field path such as ["spec", "template", "spec", "containers", 1, "env", 3] in an object, rendered as
// spec.template.spec.containers[sluice].env[PORT] (list items by their `name`, when they have one).
function fieldName(obj, fieldPath) {
  let out = "";
  let node = obj;
  for (const key of fieldPath) {
    const child = node == null ? undefined : node[key];
    if (typeof key === "number") {
      const label = child && typeof child === "object" && typeof child.name === "string" ? child.name : key;
      out += `[${label}]`;
    } else {
      out += out ? `.${key}` : key;
    }
    node = child;
  }
  return out;
}

// `file:line: Kind/name: field` for a field of an object (the line of the deepest part of the path that exists).
function where(o, fieldPath = []) {
  let line = o.line;
  if (o.doc && fieldPath.length) {
    for (let n = fieldPath.length; n > 0; n--) {
      const node = o.doc.getIn([...o.docPath, ...fieldPath.slice(0, n)], true);
      if (node && node.range) {
        line = o.lineCounter.linePos(node.range[0]).line;
        break;
      }
    }
  }
  const field = fieldPath.length ? `: ${fieldName(o.obj, fieldPath)}` : "";
  return `${o.rel}:${line}: ${o.kind}/${o.name}${field}`;
}

// ---------------------------------------------------------------------------------------------------------------
// docs/reference/settings.md (made by `sluice settings --format markdown`): the setting names and the defaults
// that matter here.

const UPSTREAM_DEFAULTS = {
  HOST: "0.0.0.0",
  PORT: "8080",
  GRPC_HOST: "0.0.0.0",
  GRPC_PORT: "8081",
  GRPC_UDS: "",
  DEBUG_HOST: "0.0.0.0",
  DEBUG_PORT: "6070",
  PROMETHEUS_ADDR: ":9090",
  USE_PROMETHEUS: "false",
  RUNTIME_ROOT: "/srv/runtime_data/current",
  RUNTIME_SUBDIRECTORY: "",
  RUNTIME_APPDIRECTORY: "config",
  CONFIG_TYPE: "FILE",
  BACKEND_TYPE: "redis",
  MERGE_DOMAIN_CONFIG: "false",
};

group("settings");
let settingsPage = "";
const documented = new Set();
const defaults = { ...UPSTREAM_DEFAULTS };
try {
  settingsPage = fs.readFileSync(settingsPath, "utf8");
  for (const m of settingsPage.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)`/g)) documented.add(m[1]);
  const fromPage = [];
  for (const name of Object.keys(UPSTREAM_DEFAULTS)) {
    // | `NAME` | takes | `value` | …   or   | `NAME` | takes | (empty) | …
    const row = settingsPage.match(new RegExp(`^\\|\\s*\`${name}\`\\s*\\|[^|]*\\|\\s*(?:\`([^\`]*)\`|\\(empty\\))\\s*\\|`, "m"));
    if (row) {
      defaults[name] = row[1] ?? "";
      fromPage.push(name);
    }
  }
  check(documented.size > 0, display(settingsPath), "no `SETTING_NAME` found in it");
  const missing = Object.keys(UPSTREAM_DEFAULTS).filter((n) => !fromPage.includes(n));
  note(
    `${documented.size} \`NAMES\` in ${display(settingsPath)}; defaults ` +
      ["PORT", "GRPC_PORT", "DEBUG_PORT", "PROMETHEUS_ADDR"].map((n) => `${n}=${defaults[n]}`).join(" ") +
      (missing.length ? ` (upstream's for ${missing.join(", ")}: no table row)` : " (from its table)"),
  );
} catch (e) {
  fail(settingsPath, `cannot read the settings page: ${e.message}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Dockerfile: the final stage's ENTRYPOINT (exec form).

function readEntrypoint() {
  let text;
  try {
    text = fs.readFileSync(dockerfilePath, "utf8");
  } catch (e) {
    return { error: `Dockerfile not found at ${dockerfilePath}: cannot check \`command\` against the image's ENTRYPOINT (${e.code || e.message})` };
  }
  // Join continuation lines, drop comments.
  const lines = text.replace(/\\\r?\n/g, " ").split(/\r?\n/).filter((l) => !/^\s*#/.test(l));
  let entrypoint = null;
  for (const line of lines) {
    const m = line.match(/^\s*([A-Za-z]+)\s+(.*)$/);
    if (!m) continue;
    const instr = m[1].toUpperCase();
    if (instr === "FROM") entrypoint = null; // a new stage
    if (instr === "ENTRYPOINT") {
      const arg = m[2].trim();
      try {
        const parsed = JSON.parse(arg);
        if (!Array.isArray(parsed) || !parsed.every((s) => typeof s === "string")) throw new Error("not a list of strings");
        entrypoint = parsed;
      } catch {
        return { error: `${dockerfilePath}: ENTRYPOINT ${arg} is not in exec form (["/bin/ratelimit"]): Kubernetes' \`command\` cannot match a shell form` };
      }
    }
  }
  if (!entrypoint) return { error: `${dockerfilePath}: the final stage sets no ENTRYPOINT` };
  return { entrypoint };
}
const dockerfile = readEntrypoint();

// ---------------------------------------------------------------------------------------------------------------
// Load every *.yaml under the manifests directory.

function yamlFiles(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...yamlFiles(p));
    else if (/\.ya?ml$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

// As Kubernetes reads manifests (sigs.k8s.io/yaml, YAML 1.1): `yes`/`on`/`y` are booleans, 0777 is octal; dates
// stay strings.
const K8S_YAML = {
  version: "1.1",
  customTags: (tags) => tags.filter((t) => t.tag !== "tag:yaml.org,2002:timestamp"),
  uniqueKeys: true,
};

group("files");
const objects = []; // { file, rel, folder, doc, docPath, lineCounter, line, obj, kind, name }
const kustomizations = []; // { file, rel, folder, obj, line }
let files = [];
if (!fs.existsSync(manifestsDir) || !fs.statSync(manifestsDir).isDirectory()) {
  fail(manifestsDir, "the manifests directory does not exist");
} else {
  files = yamlFiles(manifestsDir);
  check(files.length > 0, manifestsDir, "no *.yaml file in it");
}
for (const file of files) {
  const rel = display(file);
  const folder = path.dirname(file);
  const text = fs.readFileSync(file, "utf8");
  const lineCounter = new YAML.LineCounter();
  const docs = YAML.parseAllDocuments(text, { ...K8S_YAML, lineCounter });
  let count = 0;
  for (const doc of Array.isArray(docs) ? docs : [docs]) {
    if (doc.errors.length) {
      for (const err of doc.errors) fail(`${rel}:${err.linePos?.[0]?.line ?? "?"}`, `YAML: ${err.message.split("\n")[0]}`);
      continue;
    }
    const obj = doc.toJS({ maxAliasCount: 100 });
    if (obj == null) continue; // an empty document (a trailing ---)
    const line = doc.contents?.range ? lineCounter.linePos(doc.contents.range[0]).line : 1;
    if (typeof obj !== "object" || Array.isArray(obj)) {
      fail(`${rel}:${line}`, "a document is not a mapping");
      continue;
    }
    count++;
    if (path.basename(file) === "kustomization.yaml") {
      kustomizations.push({ file, rel, folder, obj, line });
      continue;
    }
    if (obj.kind === "List" && Array.isArray(obj.items)) {
      fail(`${rel}:${line}`, "kind: List is not used here: write one document per object");
      continue;
    }
    objects.push({
      file, rel, folder, doc, docPath: [], lineCounter, line, obj,
      kind: typeof obj.kind === "string" ? obj.kind : "?",
      name: typeof obj.metadata?.name === "string" ? obj.metadata.name : "?",
    });
  }
  check(count > 0, rel, "holds no object");
}
note(`${objects.length} objects and ${kustomizations.length} kustomization(s) in ${files.length} files`);

// ---------------------------------------------------------------------------------------------------------------
// kustomization.yaml: not an API object; its resources must exist.

group("kustomize");
for (const k of kustomizations) {
  const o = { ...k, kind: "Kustomization", name: path.basename(k.folder), doc: null };
  check(k.obj.apiVersion === "kustomize.config.k8s.io/v1beta1" && k.obj.kind === "Kustomization", where(o),
    "apiVersion/kind must be kustomize.config.k8s.io/v1beta1 Kustomization");
  const resources = k.obj.resources;
  if (!check(Array.isArray(resources) && resources.length > 0, where(o), "no `resources` list")) continue;
  const seen = new Set();
  for (const r of resources) {
    check(typeof r === "string" && !seen.has(r), where(o), `resources: ${JSON.stringify(r)} listed twice or not a path`);
    seen.add(r);
    if (typeof r !== "string" || /^[a-z]+:\/\//.test(r)) continue;
    const target = path.resolve(k.folder, r);
    if (!check(fs.existsSync(target), where(o), `resources: ${r} does not exist (${target})`)) continue;
    if (fs.statSync(target).isFile()) {
      check(objects.some((x) => x.file === target), where(o), `resources: ${r} holds no Kubernetes object`);
    }
  }
}
if (kustomizations.length === 0) note("no kustomization.yaml");
// `kubectl kustomize` builds each folder, when kubectl is at hand (it needs no cluster); skipped otherwise.
{
  let built = 0;
  let missing = false;
  for (const k of kustomizations) {
    try {
      execFileSync("kubectl", ["kustomize", k.folder], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60000 });
      pass();
      built++;
    } catch (e) {
      if (e.code === "ENOENT") {
        missing = true;
        break;
      }
      fail(`${k.rel}:${k.line}`, `kubectl kustomize ${display(k.folder)}: ${`${e.stderr ?? e.message}`.trim().split("\n")[0]}`);
    }
  }
  if (missing) note("kubectl kustomize: skipped (no kubectl)");
  else if (built) note(`kubectl kustomize built ${built}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Schemas: every object against its kubernetes-models class, unknown fields refused.

// Wraps a JSON value so that the schema validator's reads of object properties are recorded: a property the
// validator never reads is one its schema does not know (the generated validators read every known property and
// every entry of free-form maps).
function tracked(value, at, seen) {
  if (Array.isArray(value)) return value.map((v, i) => tracked(v, `${at}/${i}`, seen));
  if (value && typeof value === "object") {
    const copy = {};
    for (const [k, v] of Object.entries(value)) copy[k] = tracked(v, `${at}/${k}`, seen);
    return new Proxy(copy, {
      get(target, key, receiver) {
        if (typeof key === "string" && Object.hasOwn(target, key)) seen.add(`${at}/${key}`);
        return Reflect.get(target, key, receiver);
      },
    });
  }
  return value;
}
function unknownFields(value, at, seen, out = []) {
  if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, `${at}/${i}`, seen, out));
  else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      const p = `${at}/${k}`;
      if (seen.has(p)) unknownFields(v, p, seen, out);
      else out.push(p);
    }
  }
  return out;
}
// "/spec/template/spec/containers/0/ports" -> ["spec", "template", "spec", "containers", 0, "ports"]
function pointerPath(pointer) {
  return pointer.split("/").slice(1).map((s) => (/^\d+$/.test(s) ? Number(s) : s.replace(/~1/g, "/").replace(/~0/g, "~")));
}

group("schema");
const validObjects = [];
for (const o of objects) {
  const { obj } = o;
  const key = `${obj.apiVersion}/${obj.kind}`;
  const Model = MODELS.get(key);
  if (!Model) {
    fail(where(o), `no model for apiVersion ${JSON.stringify(obj.apiVersion)} kind ${JSON.stringify(obj.kind)}: ` +
      `unknown kinds are not allowed (known: ${[...MODELS.keys()].join(", ")})`);
    continue;
  }
  let ok = check(typeof obj.metadata?.name === "string" && obj.metadata.name !== "", where(o, ["metadata"]), "metadata.name is missing");
  const seen = new Set();
  try {
    Model.prototype.validate.call(tracked(obj, "", seen));
    pass();
  } catch (e) {
    ok = false;
    if (Array.isArray(e.errors)) {
      for (const err of e.errors) {
        const p = pointerPath(err.instancePath || "");
        const extra = err.params?.missingProperty ? ` (${err.params.missingProperty})` : "";
        fail(where(o, p), `schema: ${err.message}${extra}`);
      }
    } else {
      fail(where(o), `schema: ${e.message}`);
    }
  }
  for (const p of unknownFields(obj, "", seen)) {
    ok = false;
    fail(where(o, pointerPath(p)), `unknown field "${pointerPath(p).at(-1)}" (not in the ${obj.kind} schema)`);
  }
  const twin = validObjects.find((x) => x.folder === o.folder && x.kind === o.kind && x.name === o.name && x.obj.metadata?.namespace === obj.metadata?.namespace);
  check(!twin, where(o), `defined twice in ${display(o.folder)} (also ${twin?.rel}:${twin?.line})`);
  if (ok) validObjects.push(o);
}
note(`${validObjects.length}/${objects.length} objects valid against the Kubernetes API (kubernetes-models ${modelsVersion}, unknown fields refused)`);

// ---------------------------------------------------------------------------------------------------------------
// Sluice containers

const inFolder = (folder, kind) => validObjects.filter((x) => x.folder === folder && (!kind || x.kind === kind));
const workloads = validObjects.filter((o) => WORKLOAD_KINDS.has(o.kind));

function isSluiceImage(image) {
  if (typeof image !== "string") return false;
  const last = image.split("@")[0].split("/").at(-1);
  return last.startsWith("sluice");
}
const podSpecPath = ["spec", "template", "spec"];
const sluiceContainers = []; // { w, pod, c, cPath, env: Map, envOf(name) }
for (const w of workloads) {
  const pod = w.obj.spec.template.spec;
  for (const list of ["initContainers", "containers"]) {
    (pod[list] || []).forEach((c, i) => {
      if (!isSluiceImage(c.image)) return;
      const env = new Map();
      (c.env || []).forEach((e, j) => env.set(e.name, { ...e, index: j }));
      const envOf = (name) => {
        const e = env.get(name);
        if (e && typeof e.value === "string" && e.value !== "") return e.value;
        return e && e.valueFrom ? undefined : defaults[name]; // valueFrom: not known here
      };
      sluiceContainers.push({ w, pod, c, cPath: [...podSpecPath, list, i], env, envOf, list });
    });
  }
}

const GO_TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const GO_FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);
const isLoopback = (host) => host === "localhost" || /^127\./.test(host ?? "") || host === "::1" || host === "[::1]";
function portOfAddr(addr) {
  const m = /^(?:\[[^\]]*\]|[^:]*):(\d+)$/.exec(addr ?? "");
  return m ? Number(m[1]) : NaN;
}
function hostOfAddr(addr) {
  const m = /^(\[[^\]]*\]|[^:]*):\d+$/.exec(addr ?? "");
  return m ? m[1] : "";
}
// What Sluice listens on, from its env: name -> { port, host, setting }
function listeners(s) {
  const out = {};
  const num = (name) => Number(s.envOf(name));
  out.http = { port: num("PORT"), host: s.envOf("HOST"), setting: "PORT" };
  if (!s.envOf("GRPC_UDS")) out.grpc = { port: num("GRPC_PORT"), host: s.envOf("GRPC_HOST"), setting: "GRPC_PORT" };
  out.debug = { port: num("DEBUG_PORT"), host: s.envOf("DEBUG_HOST"), setting: "DEBUG_PORT" };
  if (GO_TRUE.has(s.envOf("USE_PROMETHEUS") ?? "")) {
    const addr = s.envOf("PROMETHEUS_ADDR");
    out.metrics = { port: portOfAddr(addr), host: hostOfAddr(addr), setting: "PROMETHEUS_ADDR" };
  }
  return out;
}
// A probe's or Service's port (a number or a container port name) as a number in container c.
function resolvePort(c, port) {
  if (typeof port === "number") return port;
  if (typeof port === "string" && /^\d+$/.test(port)) return Number(port);
  const p = (c.ports || []).find((x) => x.name === port);
  return p ? p.containerPort : NaN;
}

group("image");
if (!check(sluiceContainers.length > 0, manifestsDir, "no Sluice container (an image named sluice…) in any workload")) {
  /* nothing more to check here */
}
if (dockerfile.error) fail(null, dockerfile.error);
else note(`Dockerfile ENTRYPOINT ${JSON.stringify(dockerfile.entrypoint)}`);
for (const s of sluiceContainers) {
  const { w, c, cPath } = s;
  if (dockerfile.entrypoint) {
    check(JSON.stringify(c.command) === JSON.stringify(dockerfile.entrypoint), where(w, [...cPath, "command"]),
      `command ${JSON.stringify(c.command)} differs from the Dockerfile's ENTRYPOINT ${JSON.stringify(dockerfile.entrypoint)}`);
  } else {
    check(Array.isArray(c.command) && c.command.length > 0, where(w, [...cPath, "command"]), "no command");
  }
  const tag = c.image.split("@")[0].split("/").at(-1).split(":")[1];
  check((tag && tag !== "latest") || c.image.includes("@"), where(w, [...cPath, "image"]), `image ${c.image}: pin a version tag (not :latest)`);
  check(!c.args || c.args.length === 0, where(w, [...cPath, "args"]), "args: Sluice takes its settings from env (args would start `sluice <command>`)");
}

group("env");
for (const s of sluiceContainers) {
  const { w, c, cPath, env, pod } = s;
  const names = new Set();
  (c.env || []).forEach((e, j) => {
    const at = where(w, [...cPath, "env", j]);
    check(!names.has(e.name), at, `${e.name} is set twice`);
    names.add(e.name);
    check(documented.has(e.name), at, `${e.name} is not a setting: ${display(settingsPath)} does not list it: misspelled?`);
  });
  check(!c.envFrom, where(w, [...cPath, "envFrom"]), "envFrom: list the settings in env, so that their names can be checked against the settings page");
  // Values that must parse, as Sluice parses them at start-up.
  for (const name of ["PORT", "GRPC_PORT", "DEBUG_PORT"]) {
    const v = s.envOf(name);
    if (v !== undefined) check(/^\d+$/.test(v) && Number(v) <= 65535, where(w, [...cPath, "env", env.get(name)?.index ?? 0]), `${name}=${v}: expected a whole number from 0 to 65535`);
  }
  for (const name of ["USE_PROMETHEUS", "USE_STATSD", "RUNTIME_WATCH_ROOT", "RUNTIME_IGNOREDOTFILES", "MERGE_DOMAIN_CONFIG"]) {
    const e = env.get(name);
    if (e && typeof e.value === "string" && e.value !== "") {
      check(GO_TRUE.has(e.value) || GO_FALSE.has(e.value), where(w, [...cPath, "env", e.index]), `${name}=${e.value}: not a Go boolean`);
    }
  }
  if (GO_TRUE.has(s.envOf("USE_PROMETHEUS") ?? "")) {
    check(!Number.isNaN(portOfAddr(s.envOf("PROMETHEUS_ADDR"))), where(w, [...cPath, "env", env.get("PROMETHEUS_ADDR")?.index ?? 0]),
      `PROMETHEUS_ADDR=${s.envOf("PROMETHEUS_ADDR")}: expected host:port or :port`);
  }
  // The backend: explicit, and memory only where one process sees all the traffic it limits.
  const backendEnv = env.get("BACKEND_TYPE");
  if (check(backendEnv && typeof backendEnv.value === "string", where(w, [...cPath, "env"]),
    "BACKEND_TYPE is not set: say memory, redis or memcache (the default, redis on a unix socket, does not exist in the image)")) {
    const backend = backendEnv.value;
    const bAt = where(w, [...cPath, "env", backendEnv.index]);
    if (check(["memory", "redis", "memcache"].includes(backend), bAt, `BACKEND_TYPE=${backend}: expected memory, redis or memcache`)) {
      const others = [...(pod.containers || []), ...(pod.initContainers || [])].filter((x) => x !== c);
      if (backend === "memory" && others.length === 0) {
        const replicas = w.obj.spec.replicas ?? 1;
        check(w.kind !== "DaemonSet" && replicas === 1, where(w, ["spec", "replicas"]),
          `BACKEND_TYPE=memory with ${w.kind === "DaemonSet" ? "a pod per node" : `${replicas} replicas`}: counters are per process, so every limit would be multiplied; use 1 replica, a sidecar per Envoy, or Redis`);
      }
      if (backend === "redis") {
        check(env.has("REDIS_URL"), bAt, "BACKEND_TYPE=redis without REDIS_URL: the default is a unix socket (/var/run/nutcracker/ratelimit.sock)");
        if (s.envOf("REDIS_SOCKET_TYPE") === "tcp" && env.get("REDIS_URL")?.value) {
          const url = env.get("REDIS_URL").value;
          check(/^(rediss?:\/\/.+|[^\s/,]+:\d+(,[^\s/,]+:\d+)*|[^,\s]+(,[^\s/,]+:\d+)+)$/.test(url), where(w, [...cPath, "env", env.get("REDIS_URL").index]),
            `REDIS_URL=${url}: expected host:port (or redis://…) with REDIS_SOCKET_TYPE=tcp`);
        }
      }
      if (backend === "memcache") check(env.has("MEMCACHE_HOST_PORT") || env.has("MEMCACHE_SRV"), bAt, "BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT or MEMCACHE_SRV");
    }
  }
}

group("ports");
for (const s of sluiceContainers) {
  const { w, c, cPath } = s;
  const ls = listeners(s);
  for (const [name, l] of Object.entries(ls)) {
    check(Number.isInteger(l.port) && l.port > 0, where(w, [...cPath, "env"]), `${l.setting} gives no usable port for ${name}`);
  }
  const declared = new Map();
  (c.ports || []).forEach((p, j) => {
    const at = where(w, [...cPath, "ports", j]);
    check(!p.protocol || p.protocol === "TCP", at, `protocol ${p.protocol}: Sluice listens on TCP`);
    check(!p.hostPort, at, "hostPort: not needed (Services and port-forward reach the pod)");
    const match = Object.entries(ls).filter(([, l]) => l.port === p.containerPort);
    if (!check(match.length > 0, at, `containerPort ${p.containerPort} is none of the ports Sluice listens on here (${Object.entries(ls).map(([n, l]) => `${n} ${l.port} from ${l.setting}`).join(", ")})`)) return;
    if (p.name !== undefined) {
      const byName = ls[p.name];
      check(byName && byName.port === p.containerPort, at,
        byName ? `port ${p.name} is ${p.containerPort} but ${byName.setting} makes Sluice listen on ${byName.port}`
          : `port name ${p.name}: use http, grpc, debug or metrics (the listener it is: ${match.map(([n]) => n).join("/")})`);
    }
    for (const [n, l] of match) {
      check(!isLoopback(l.host), at, `containerPort ${p.containerPort} (${n}) is declared but Sluice binds it to ${l.host}: nothing outside the pod can reach it`);
      declared.set(n, p);
    }
  });
  check(declared.has("http"), where(w, [...cPath, "ports"]), `no container port for HTTP (${ls.http.port}, PORT): the probes and /json use it`);
  if (ls.grpc) check(declared.has("grpc") || isLoopback(ls.grpc.host), where(w, [...cPath, "ports"]), `no container port for gRPC (${ls.grpc.port}, GRPC_PORT)`);
}

group("probes");
for (const s of sluiceContainers) {
  const { w, c, cPath } = s;
  const httpPort = Number(s.envOf("PORT"));
  const https = !!s.envOf("HTTP_SERVER_TLS_CERT");
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const p = c[probe];
    const at = where(w, [...cPath, probe]);
    if (!check(p, at, `no ${probe}`)) continue;
    if (!check(p.httpGet && !p.exec && !p.tcpSocket && !p.grpc, at, "must be an httpGet probe of /healthcheck")) continue;
    check(p.httpGet.path === "/healthcheck", where(w, [...cPath, probe, "httpGet", "path"]), `path ${p.httpGet.path}: expected /healthcheck`);
    const port = resolvePort(c, p.httpGet.port);
    check(port === httpPort, where(w, [...cPath, probe, "httpGet", "port"]),
      `port ${JSON.stringify(p.httpGet.port)}${Number.isNaN(port) ? " names no container port" : ` is ${port}`}: expected the HTTP port ${httpPort} (PORT)`);
    const scheme = p.httpGet.scheme ?? "HTTP";
    check(scheme === (https ? "HTTPS" : "HTTP"), where(w, [...cPath, probe, "httpGet", "scheme"]),
      `scheme ${scheme}: the HTTP listener speaks ${https ? "HTTPS (HTTP_SERVER_TLS_CERT)" : "plain HTTP"}`);
  }
}

group("security");
for (const s of sluiceContainers) {
  const { w, c, cPath, pod } = s;
  const psc = pod.securityContext || {};
  const csc = c.securityContext || {};
  const eff = (k) => (csc[k] !== undefined ? csc[k] : psc[k]);
  check(eff("runAsNonRoot") === true, where(w, [...cPath, "securityContext"]), "runAsNonRoot must be true (pod or container)");
  check(eff("runAsUser") === undefined || eff("runAsUser") !== 0, where(w, [...cPath, "securityContext"]), "runAsUser 0 (root)");
  check(csc.readOnlyRootFilesystem === true, where(w, [...cPath, "securityContext", "readOnlyRootFilesystem"]), "readOnlyRootFilesystem must be true");
  check(csc.allowPrivilegeEscalation === false, where(w, [...cPath, "securityContext", "allowPrivilegeEscalation"]), "allowPrivilegeEscalation must be false");
  check(csc.privileged !== true, where(w, [...cPath, "securityContext", "privileged"]), "privileged");
  check(Array.isArray(csc.capabilities?.drop) && csc.capabilities.drop.includes("ALL"), where(w, [...cPath, "securityContext", "capabilities"]), "capabilities.drop must include ALL");
  check(!csc.capabilities?.add?.length, where(w, [...cPath, "securityContext", "capabilities", "add"]), "capabilities.add: Sluice needs none");
  const seccomp = eff("seccompProfile")?.type;
  check(seccomp === "RuntimeDefault" || seccomp === "Localhost", where(w, [...podSpecPath, "securityContext"]), `seccompProfile ${seccomp ?? "unset"}: expected RuntimeDefault`);
  check(pod.automountServiceAccountToken === false, where(w, [...podSpecPath, "automountServiceAccountToken"]), "automountServiceAccountToken must be false (Sluice never calls the Kubernetes API)");
  check(pod.enableServiceLinks === false, where(w, [...podSpecPath, "enableServiceLinks"]),
    "enableServiceLinks must be false: a Service named grpc or debug would inject GRPC_PORT=tcp://… or DEBUG_PORT=tcp://…, which Sluice reads as settings");
  check(!pod.hostNetwork && !pod.hostPID && !pod.hostIPC, where(w, podSpecPath), "hostNetwork/hostPID/hostIPC");
  check(c.resources?.limits?.memory !== undefined, where(w, [...cPath, "resources", "limits"]), "no memory limit");
  check(c.resources?.requests?.cpu !== undefined && c.resources?.requests?.memory !== undefined, where(w, [...cPath, "resources", "requests"]), "requests need cpu and memory");
}

// ---------------------------------------------------------------------------------------------------------------
// Rules: the ConfigMap mount and the rule files in it.

group("rules");
const rulesConfigMaps = new Map(); // ConfigMap object -> [{ key, domain }]
function loadRulesConfigMap(cm, keys) {
  const out = [];
  for (const key of keys) {
    const at = where(cm, ["data", key]);
    check(/\.ya?ml$/.test(key), at, `key ${key}: a rule file's name must end in .yaml`);
    const text = cm.obj.data?.[key];
    if (!check(typeof text === "string", at, `key ${key} is not in data`)) continue;
    let rules;
    try {
      rules = YAML.parse(text, { uniqueKeys: true });
      pass();
    } catch (e) {
      fail(at, `${key} is not valid YAML: ${e.message.split("\n")[0]}`);
      continue;
    }
    if (!check(rules && typeof rules === "object" && !Array.isArray(rules), at, `${key} is not a YAML mapping`)) continue;
    check(typeof rules.domain === "string" && rules.domain !== "", at, `${key} has no \`domain\``);
    check(rules.descriptors === undefined || Array.isArray(rules.descriptors), at, `${key}: descriptors must be a list`);
    out.push({ key, domain: rules.domain, text });
  }
  return out;
}
for (const s of sluiceContainers) {
  const { w, c, cPath, pod } = s;
  if (s.envOf("CONFIG_TYPE") !== "FILE") {
    note(`${w.rel}: ${w.kind}/${w.name} container ${c.name}: CONFIG_TYPE=${s.envOf("CONFIG_TYPE")}, no rules mount expected`);
    continue;
  }
  const dir = path.posix.join(s.envOf("RUNTIME_ROOT"), s.envOf("RUNTIME_SUBDIRECTORY") ?? "", s.envOf("RUNTIME_APPDIRECTORY") || "config");
  const mounts = c.volumeMounts || [];
  const j = mounts.findIndex((m) => path.posix.normalize(m.mountPath).replace(/\/$/, "") === dir);
  if (!check(j >= 0, where(w, [...cPath, "volumeMounts"]), `no volume mounted at ${dir} (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)`)) continue;
  const m = mounts[j];
  const mAt = where(w, [...cPath, "volumeMounts", j]);
  check(m.readOnly === true, mAt, "the rules mount must be readOnly: true");
  check(!m.subPath && !m.subPathExpr, mAt, "subPath: a ConfigMap mounted with subPath is never updated, so rules would not reload");
  const vIndex = (pod.volumes || []).findIndex((v) => v.name === m.name);
  if (!check(vIndex >= 0, mAt, `volume ${m.name} is not in the pod's volumes`)) continue;
  const vol = pod.volumes[vIndex];
  const vAt = where(w, [...podSpecPath, "volumes", vIndex]);
  const sources = vol.configMap ? [vol.configMap] : (vol.projected?.sources || []).map((x) => x.configMap).filter(Boolean);
  if (!check(sources.length > 0, vAt, `volume ${m.name} is not a ConfigMap (or projected ConfigMaps)`)) continue;
  for (const src of sources) {
    const cm = inFolder(w.folder, "ConfigMap").find((x) => x.name === src.name);
    if (!check(cm, vAt, `ConfigMap ${src.name} is not defined in ${display(w.folder)}/`)) continue;
    const keys = src.items ? src.items.map((i) => i.key) : Object.keys(cm.obj.data || {});
    if (src.items) src.items.forEach((i) => check(/\.ya?ml$/.test(i.path), vAt, `items: path ${i.path} must end in .yaml`));
    check(keys.length > 0 && !cm.obj.binaryData, where(cm, ["data"]), "holds no rule file (data) or holds binaryData");
    const rules = loadRulesConfigMap(cm, keys);
    rulesConfigMaps.set(cm, rules);
    const domains = rules.map((r) => r.domain);
    const dup = domains.find((d, i) => domains.indexOf(d) !== i);
    check(!dup || GO_TRUE.has(s.envOf("MERGE_DOMAIN_CONFIG") ?? ""), where(cm, ["data"]),
      `domain ${dup} is in two files: Sluice refuses that without MERGE_DOMAIN_CONFIG=true`);
  }
}
// MEMORY_SNAPSHOT_FILE: the memory backend's, in a folder a writable volume is mounted at (the root file system
// is read-only), an emptyDir (survives container restarts) or a PersistentVolumeClaim (survives the pod).
for (const s of sluiceContainers) {
  const { w, c, cPath, pod } = s;
  const file = s.envOf("MEMORY_SNAPSHOT_FILE");
  if (!file) continue;
  const at = where(w, [...cPath, "env", s.env.get("MEMORY_SNAPSHOT_FILE")?.index ?? 0]);
  check(s.envOf("BACKEND_TYPE") === "memory", at, `MEMORY_SNAPSHOT_FILE with BACKEND_TYPE=${s.envOf("BACKEND_TYPE")}: Sluice refuses to start`);
  const folder = path.posix.dirname(path.posix.normalize(file));
  const mounts = c.volumeMounts || [];
  const j = mounts.findIndex((m) => path.posix.normalize(m.mountPath).replace(/\/$/, "") === folder);
  if (!check(j >= 0, at, `no volume mounted at ${folder} (MEMORY_SNAPSHOT_FILE's folder): the read-only root file system cannot take the file, and Sluice refuses to start`)) continue;
  const m = mounts[j];
  check(m.readOnly !== true, where(w, [...cPath, "volumeMounts", j]), "MEMORY_SNAPSHOT_FILE's volume must be writable");
  const vol = (pod.volumes || []).find((v) => v.name === m.name);
  check(vol && (vol.emptyDir || vol.persistentVolumeClaim), where(w, [...cPath, "volumeMounts", j]),
    `volume ${m.name} for MEMORY_SNAPSHOT_FILE: expected an emptyDir or a persistentVolumeClaim`);
}
// The rules ConfigMaps of all folders agree, key by key (they are one example).
{
  const all = [...rulesConfigMaps.entries()];
  for (const [cm, rules] of all.slice(1)) {
    const [first, firstRules] = all[0];
    const a = JSON.stringify(Object.fromEntries(rules.map((r) => [r.key, r.text])));
    const b = JSON.stringify(Object.fromEntries(firstRules.map((r) => [r.key, r.text])));
    if (cm.name === first.name) check(a === b, where(cm, ["data"]), `differs from ${first.rel} (the example rules should be the same everywhere)`);
  }
}
// sluice check-config on each rules ConfigMap, when the binary is at hand.
{
  const bin = opts.sluice !== undefined ? opts.sluice : path.join(repo, "build", "sluice");
  if (!bin) note("sluice check-config: skipped (--sluice \"\")");
  else if (!fs.existsSync(bin)) note(`sluice check-config: skipped (${bin} not built)`);
  else {
    let ran = 0;
    for (const [cm, rules] of rulesConfigMaps) {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-rules-"));
      try {
        for (const r of rules) fs.writeFileSync(path.join(tmp, path.basename(r.key)), r.text);
        let out = "";
        let status = 0;
        try {
          out = execFileSync(bin, ["check-config", tmp], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30000 });
        } catch (e) {
          out = `${e.stdout ?? ""}${e.stderr ?? ""}`;
          status = e.status ?? -1;
        }
        if (status === 0 && /all rate limit configs ok/.test(out)) {
          pass();
          ran++;
        } else if (/error loading rate limit configs/.test(out)) {
          fail(where(cm, ["data"]), `sluice check-config: ${out.trim().split("\n").at(-1).replaceAll(tmp + "/", "")}`);
          ran++;
        } else {
          note(`sluice check-config: could not run ${bin} (status ${status}): ${out.trim().split("\n")[0] ?? ""}`);
        }
      } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    }
    if (ran) note(`sluice check-config loaded ${ran} rules ConfigMap(s) with ${bin}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Selectors: workloads select their own pods; Services and PodDisruptionBudgets select a workload in their folder
// and name ports that exist.

const matches = (selector, labels) => !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
const podLabels = (w) => w.obj.spec.template.metadata?.labels || {};

group("selectors");
for (const w of workloads) {
  const sel = w.obj.spec.selector;
  check(!sel.matchExpressions?.length, where(w, ["spec", "selector", "matchExpressions"]), "matchExpressions: use matchLabels (the checks below read only those)");
  check(matches(sel.matchLabels, podLabels(w)), where(w, ["spec", "selector", "matchLabels"]), "selector does not match the pod template's labels");
  check(podLabels(w)["app.kubernetes.io/name"], where(w, ["spec", "template", "metadata", "labels"]), "no app.kubernetes.io/name label");
  // A port name used by two containers of a pod: Services (and other containers' probes) take the first one.
  const portNames = new Map();
  for (const list of ["initContainers", "containers"]) {
    (w.obj.spec.template.spec[list] || []).forEach((c, i) => (c.ports || []).forEach((p, j) => {
      if (p.name === undefined) return;
      const other = portNames.get(p.name);
      check(!other || other === c.name, where(w, [...podSpecPath, list, i, "ports", j]),
        `port name ${p.name} is also a port of container ${other}: a Service's targetPort ${p.name} would reach only the first`);
      portNames.set(p.name, c.name);
    }));
  }
}
for (const svc of validObjects.filter((o) => o.kind === "Service")) {
  const sel = svc.obj.spec?.selector;
  const targets = workloads.filter((w) => w.folder === svc.folder && matches(sel, podLabels(w)));
  if (!check(targets.length > 0, where(svc, ["spec", "selector"]), `selects no workload's pods in ${display(svc.folder)}/`)) continue;
  const pods = targets.map((w) => ({ w, containers: [...(w.obj.spec.template.spec.containers || []), ...(w.obj.spec.template.spec.initContainers || [])] }));
  const sluiceHere = sluiceContainers.filter((s) => targets.includes(s.w));
  if (sluiceHere.length) check((svc.obj.spec.type ?? "ClusterIP") === "ClusterIP", where(svc, ["spec", "type"]), `type ${svc.obj.spec.type}: keep the rate limit service inside the cluster (ClusterIP)`);
  (svc.obj.spec.ports || []).forEach((p, j) => {
    const at = where(svc, ["spec", "ports", j]);
    const target = p.targetPort ?? p.port;
    const hits = [];
    for (const { w, containers } of pods) {
      for (const c of containers) {
        const found = (c.ports || []).find((cp) => (typeof target === "string" && !/^\d+$/.test(target) ? cp.name === target : cp.containerPort === Number(target)));
        if (found) hits.push({ w, c, port: found.containerPort });
      }
    }
    if (!check(hits.length > 0, at, `targetPort ${JSON.stringify(target)} is no container port of ${targets.map((w) => `${w.kind}/${w.name}`).join(", ")}`)) return;
    for (const h of hits) {
      const s = sluiceContainers.find((x) => x.w === h.w && x.c === h.c);
      if (!s) continue;
      const ls = listeners(s);
      if (ls.grpc && h.port === ls.grpc.port) check(p.appProtocol === "kubernetes.io/h2c", at, `gRPC port without appProtocol: kubernetes.io/h2c (gRPC is HTTP/2 cleartext; meshes and gateways need to know)`);
      check(!ls.debug || h.port !== ls.debug.port, at, `exposes Sluice's debug server (${ls.debug.port}: /rlconfig, /stats, pprof): use kubectl port-forward instead`);
    }
  });
}
for (const pdb of validObjects.filter((o) => o.kind === "PodDisruptionBudget")) {
  const sel = pdb.obj.spec?.selector?.matchLabels;
  const targets = workloads.filter((w) => w.folder === pdb.folder && matches(sel, podLabels(w)));
  if (!check(targets.length > 0, where(pdb, ["spec", "selector"]), `selects no workload's pods in ${display(pdb.folder)}/`)) continue;
  for (const w of targets) {
    const replicas = w.obj.spec.replicas ?? 1;
    const scaled = (v, roundUp) => (typeof v === "string" && v.endsWith("%") ? (roundUp ? Math.ceil : Math.floor)((replicas * parseInt(v, 10)) / 100) : Number(v));
    const { minAvailable, maxUnavailable } = pdb.obj.spec;
    check((minAvailable === undefined) !== (maxUnavailable === undefined), where(pdb, ["spec"]), "set exactly one of minAvailable and maxUnavailable");
    const allowed = maxUnavailable !== undefined ? scaled(maxUnavailable, true) : replicas - scaled(minAvailable, true);
    check(allowed >= 1, where(pdb, ["spec"]), `allows ${allowed} disruptions of ${w.kind}/${w.name} (${replicas} replicas): node drains would hang on it`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Envoy bootstraps in ConfigMaps: the rate limit filter reaches Sluice's gRPC port over HTTP/2.

group("envoy");
function* walk(value) {
  if (Array.isArray(value)) for (const v of value) yield* walk(v);
  else if (value && typeof value === "object") {
    yield value;
    for (const v of Object.values(value)) yield* walk(v);
  }
}
let bootstraps = 0;
for (const cm of validObjects.filter((o) => o.kind === "ConfigMap")) {
  for (const [key, text] of Object.entries(cm.obj.data || {})) {
    let boot;
    try {
      boot = YAML.parse(text, { uniqueKeys: true });
    } catch {
      continue;
    }
    if (!boot || typeof boot !== "object" || !boot.static_resources) continue;
    bootstraps++;
    const at = where(cm, ["data", key]);
    const clusters = boot.static_resources.clusters || [];
    const filters = [...walk(boot)].filter((x) => x.name === "envoy.filters.http.ratelimit" && x.typed_config);
    if (!check(filters.length > 0, at, `${key}: an Envoy bootstrap without an envoy.filters.http.ratelimit filter`)) continue;
    // Pods that mount this ConfigMap, and the rules domains of their folder.
    const mounting = workloads.filter((w) => w.folder === cm.folder && (w.obj.spec.template.spec.volumes || []).some((v) => v.configMap?.name === cm.name));
    const domains = new Set([...rulesConfigMaps].filter(([r]) => r.folder === cm.folder).flatMap(([, rules]) => rules.map((r) => r.domain)));
    for (const f of filters) {
      const tc = f.typed_config;
      check(tc["@type"] === "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit", at, `${key}: ratelimit filter @type ${tc["@type"]}`);
      check(domains.size === 0 || domains.has(tc.domain), at, `${key}: ratelimit filter domain ${tc.domain} is in no rules ConfigMap here (${[...domains].join(", ")})`);
      const rls = tc.rate_limit_service || {};
      check(rls.transport_api_version === "V3", at, `${key}: rate_limit_service.transport_api_version must be V3`);
      const clusterName = rls.grpc_service?.envoy_grpc?.cluster_name;
      const cluster = clusters.find((cl) => cl.name === clusterName);
      if (!check(cluster, at, `${key}: rate_limit_service.grpc_service.envoy_grpc.cluster_name ${clusterName} is no cluster of static_resources`)) continue;
      const h2 = cluster.typed_extension_protocol_options?.["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]?.explicit_http_config?.http2_protocol_options ?? cluster.http2_protocol_options;
      check(h2 !== undefined, at, `${key}: cluster ${clusterName} does not speak HTTP/2 (typed_extension_protocol_options … explicit_http_config.http2_protocol_options): gRPC needs it`);
      const addrs = [...walk(cluster.load_assignment)].filter((x) => x.socket_address).map((x) => x.socket_address);
      if (!check(addrs.length > 0, at, `${key}: cluster ${clusterName} has no endpoint`)) continue;
      for (const a of addrs) {
        if (isLoopback(a.address)) {
          const sidecars = sluiceContainers.filter((s) => mounting.includes(s.w));
          check(sidecars.length > 0 && sidecars.every((s) => listeners(s).grpc?.port === a.port_value), at,
            `${key}: cluster ${clusterName} calls ${a.address}:${a.port_value}, but ${sidecars.length ? `the Sluice sidecar listens for gRPC on ${sidecars.map((s) => listeners(s).grpc?.port).join("/")}` : "no pod mounting it has a Sluice container"}`);
        } else {
          const svcName = String(a.address).split(".")[0];
          const svc = validObjects.find((o) => o.kind === "Service" && o.folder === cm.folder && o.name === svcName);
          if (svc) check((svc.obj.spec.ports || []).some((p) => p.port === a.port_value), at, `${key}: cluster ${clusterName} calls ${a.address}:${a.port_value}, a port Service ${svcName} does not have`);
          else note(`${cm.rel}: cluster ${clusterName} calls ${a.address}:${a.port_value}, outside these manifests`);
        }
      }
    }
  }
}
if (!bootstraps) note("no Envoy bootstrap in a ConfigMap");
else note(`${bootstraps} Envoy bootstrap(s)`);

// ---------------------------------------------------------------------------------------------------------------
// Report

let passed = 0;
let failed = 0;
for (const g of groups) {
  const ok = g.problems.length === 0;
  if (ok) passed++;
  else failed++;
  const summary = ok ? `${g.checks} checks` : `${g.problems.length} of ${g.checks} checks failed`;
  console.log(`${ok ? "ok  " : "FAIL"}  ${g.name.padEnd(10)} ${summary}${g.notes.length ? `; ${g.notes.join("; ")}` : ""}`);
  for (const p of g.problems) console.log(`        - ${p}`);
}
console.log(`manifests: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
