#!/usr/bin/env node
// Checks the Envoy configuration snippets of Markdown pages against Envoy's API protos.
//
//   node tests/docs/envoy/check_envoy_snippets.mjs FILE.md...
//
// A snippet is a fenced ```yaml block right after (blank lines aside) a marker naming its root message:
//
//   <!-- envoy: envoy.extensions.filters.http.ratelimit.v3.RateLimit -->
//   <!-- envoy: envoy.config.route.v3.RateLimit[] -->          ([]: the YAML is a list of that message)
//
// Every key must be a field of its message (proto or JSON name), google.protobuf.Any follows its @type, enums must
// name a value, and a list, map or scalar must stand where the proto has one. Values of scalar fields are not checked
// further. The protos are the copy of Envoy's API that @grpc/grpc-js-xds ships, which is older than the Envoy that the
// docs describe: fields added since are listed in NEWER_FIELDS below, reported as information, not failures.
//
// Output: `ok FILE:LINE TYPE` (or `FAIL ...`) per snippet, problems on stderr, then `N snippets checked, M failed`.
// Exit status: 0 all passed, 1 a snippet failed, 2 the checker could not run (usage, protos, a stale table).

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import protobuf from "protobufjs";
import YAML, { LineCounter, isAlias, isMap, isScalar, isSeq } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const depsDir = path.join(here, "node_modules", "@grpc", "grpc-js-xds", "deps");

// Fields that Envoy added after the bundled copy of its API: envoyproxy/data-plane-api f8b75d1 (2024-07-19, a
// mirror of envoyproxy/envoy 799e3e2's api/), which is what @grpc/grpc-js-xds 1.14.1 ships. Each gives the first
// Envoy release that has it (changelogs/<version>.yaml in envoyproxy/envoy) and its type: a proto scalar, a message or
// enum of the bundled API, or `fields` for a message that is itself newer. A sub-field's `envoy` is printed only when
// it is later than its parent's. `retyped` marks a field that the bundled API has, with an older type.
// Start-up fails when the bundled protos already have a listed field (or have it with the listed type), so that an
// upgrade of the protos shows which entries to drop.
export const NEWER_FIELDS = {
  "envoy.config.route.v3.RateLimit": {
    // envoy#37567 (api/envoy/config/route/v3/route_components.proto), changelogs/1.33.0.yaml
    hits_addend: {
      envoy: "1.33", message: "envoy.config.route.v3.RateLimit.HitsAddend", fields: {
        number: { envoy: "1.33", type: "google.protobuf.UInt64Value" },
        format: { envoy: "1.33", type: "string" },
        is_negative_hits: { envoy: "1.38", type: "bool" }, // envoy#44059, changelogs/1.38.0.yaml
      },
    },
    // envoy#37548, changelogs/1.33.0.yaml
    apply_on_stream_done: { envoy: "1.33", type: "bool" },
  },
  "envoy.extensions.filters.http.ratelimit.v3.RateLimit": {
    // envoy#40118 (api/envoy/extensions/filters/http/ratelimit/v3/rate_limit.proto), changelogs/1.36.0.yaml
    rate_limits: { envoy: "1.36", type: "envoy.config.route.v3.RateLimit", repeated: true },
  },
  "envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute": {
    // The bundled API has it as `repeated RateLimitConfig` (hidden, never implemented); envoy#37684 made it
    // `repeated config.route.v3.RateLimit`, changelogs/1.33.0.yaml.
    rate_limits: { envoy: "1.33", type: "envoy.config.route.v3.RateLimit", repeated: true, retyped: true },
  },
  "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor": {
    // envoy#44059 (api/envoy/extensions/common/ratelimit/v3/ratelimit.proto), changelogs/1.38.0.yaml
    is_negative_hits: { envoy: "1.38", type: "bool" },
  },
};

// Messages that the bundled API lacks altogether, accepted as an Any's @type; their contents go unchecked. No doc
// snippet uses ApiKeyAuth today: it keeps this path exercised (fixtures/valid.md).
export const NEWER_TYPES = {
  // envoy#36709 (api/envoy/extensions/filters/http/api_key_auth/v3/api_key_auth.proto), changelogs/1.33.0.yaml
  "envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuth": "1.33",
};

const PROTO_SCALARS = new Set(["double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
  "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"]);
const WRAPPERS = new Set(["DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value",
  "BoolValue", "StringValue", "BytesValue"].map((n) => `google.protobuf.${n}`));
// Well-known types whose JSON form is not an object of their fields (inside an Any they sit under `value`).
const SPECIAL_JSON = new Set([...WRAPPERS, "google.protobuf.Duration", "google.protobuf.Timestamp",
  "google.protobuf.FieldMask", "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

const fullName = (t) => t.fullName.replace(/^\./, "");
// protoc's JSON name: drop each underscore and upper-case the character after it.
const jsonName = (name) => name.replace(/_(.)/g, (_, c) => c.toUpperCase());
const kindOf = (node) => (isMap(node) ? "a map" : isSeq(node) ? "a list" : "a scalar");
// A table entry by its proto or JSON name.
// Own properties only: a key such as `toString` or `constructor` is no field.
const byName = (entries, key) =>
  (Object.hasOwn(entries, key) ? entries[key] : undefined) ??
  Object.entries(entries).find(([name]) => jsonName(name) === key)?.[1];

// Loads every v3 proto of the bundled API (v2 ones import files the package does not ship; a few v3 ones import
// OpenCensus, OpenTelemetry or Prometheus protos, also absent: those files are left out, with what needs them).
export function loadProtos() {
  const roots = ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((d) => path.join(depsDir, d));
  if (!fs.existsSync(roots[0])) throw new Error(`${roots[0]} not found: run npm ci in ${here} (run.sh does)`);
  roots.push(path.join(here, "node_modules", "protobufjs")); // google/protobuf/descriptor.proto, for the options
  const find = (name) => {
    if (protobuf.common[name]) return name;
    for (const r of roots) if (fs.existsSync(path.join(r, name))) return path.join(r, name);
    return null;
  };
  const missing = new Map(); // proto file -> first import in its closure that is not there, or null
  const missingImport = (name) => {
    if (missing.has(name)) return missing.get(name);
    missing.set(name, null); // an import cycle is not a missing file
    const file = find(name);
    let result = file ? null : name;
    if (file && !protobuf.common[name]) {
      for (const m of fs.readFileSync(file, "utf8").matchAll(/^import\s+(?:public\s+|weak\s+)?"([^"]+)"/gm)) {
        if ((result = missingImport(m[1]))) break;
      }
    }
    missing.set(name, result);
    return result;
  };
  const files = [];
  const walk = (dir, base) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p, base);
      else if (e.name.endsWith(".proto")) files.push(path.relative(base, p));
    }
  };
  walk(path.join(roots[0], "envoy"), roots[0]);
  walk(path.join(roots[1], "xds"), roots[1]);
  walk(path.join(roots[1], "udpa"), roots[1]);
  const skipped = [];
  const wanted = files.filter((f) => /\/v3(alpha)?\//.test(f) || !/\/v\d/.test(f)).filter((f) => {
    const m = missingImport(f);
    if (m) skipped.push(`${f} (needs ${m})`);
    return !m;
  });
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => find(target);
  root.loadSync(wanted, { keepCase: true });
  root.resolveAll();
  return { root, skipped };
}

// Turns a table entry into the shape the walker uses, or throws naming what is wrong with it.
function tableShape(root, owner, name, spec) {
  const where = `${owner}.${name}`;
  if (!/^\d+\.\d+$/.test(spec.envoy ?? "")) throw new Error(`${where}: no Envoy version`);
  let target;
  if (spec.fields) {
    target = { newer: spec.message, fields: {} };
    for (const [sub, s] of Object.entries(spec.fields)) target.fields[sub] = tableShape(root, spec.message, sub, s);
  } else if (PROTO_SCALARS.has(spec.type)) {
    target = "scalar";
  } else {
    target = root.lookup(spec.type);
    if (!(target instanceof protobuf.Type || target instanceof protobuf.Enum)) {
      throw new Error(`${where}: type ${spec.type} is not in the bundled API`);
    }
  }
  return { repeated: !!spec.repeated, map: false, target, envoy: spec.envoy, retyped: !!spec.retyped, name: where };
}

// Checks the tables against the loaded protos and returns them as lookups: Map(message name -> {field: shape}).
export function verifyTables(root, newerFields = NEWER_FIELDS, newerTypes = NEWER_TYPES) {
  const problems = [];
  const table = new Map();
  for (const [msg, fields] of Object.entries(newerFields)) {
    const type = root.lookup(msg);
    if (!(type instanceof protobuf.Type)) {
      problems.push(`NEWER_FIELDS: message ${msg} is not in the bundled API (a newer message goes in its parent's entry)`);
      continue;
    }
    const shapes = {};
    for (const [name, spec] of Object.entries(fields)) {
      const have = type.fields[name];
      try {
        const shape = tableShape(root, msg, name, spec);
        if (have && !spec.retyped) {
          problems.push(`NEWER_FIELDS: ${msg}.${name} is in the bundled API already: remove it from the table`);
        } else if (!have && spec.retyped) {
          problems.push(`NEWER_FIELDS: ${msg}.${name} is marked retyped but the bundled API lacks it`);
        } else if (have && have.resolvedType === shape.target) {
          problems.push(`NEWER_FIELDS: ${msg}.${name} has type ${spec.type} in the bundled API already: remove it`);
        } else {
          shapes[name] = shape;
        }
      } catch (e) {
        problems.push(`NEWER_FIELDS: ${e.message}`);
      }
    }
    table.set(msg, shapes);
  }
  for (const name of Object.keys(newerTypes)) {
    if (root.lookup(name)) problems.push(`NEWER_TYPES: ${name} is in the bundled API already: remove it`);
  }
  if (problems.length) throw new Error(problems.join("\n"));
  return { fields: table, types: newerTypes };
}

// Fenced ```yaml blocks after an envoy marker; problems with the markers themselves go to `errors`.
export function findSnippets(text, file, errors) {
  const lines = text.split(/\r?\n/);
  const snippets = [];
  let pending = null; // the marker waiting for its block: {type, list, line}
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/);
    if (fence) {
      // Find the closing fence (same character, at least as long); the block's lines lose the fence's indent.
      const [, indent, mark, info] = fence;
      let end = i + 1;
      while (end < lines.length && !new RegExp(`^\\s*${mark[0]}{${mark.length},}\\s*$`).test(lines[end])) end++;
      if (pending) {
        if (info !== "yaml") errors.push(`${file}:${pending.line}: the envoy marker is followed by a \`\`\`${info} block, not \`\`\`yaml`);
        else if (end >= lines.length) errors.push(`${file}:${i + 1}: the \`\`\`yaml block is never closed`);
        else {
          const body = lines.slice(i + 1, end).map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l.trimStart()));
          snippets.push({ ...pending, fenceLine: i + 1, yaml: body.join("\n") });
        }
        pending = null;
      }
      i = end;
      continue;
    }
    if (/^\s*$/.test(line)) continue;
    if (pending) {
      errors.push(`${file}:${pending.line}: the envoy marker is not followed by a \`\`\`yaml block`);
      pending = null;
    }
    if (/^\s*<!--\s*envoy\s*:/.test(line)) {  // a marker starts its line; one quoted in prose is not
      const m = line.match(/^\s*<!--\s*envoy:\s*([A-Za-z_][\w.]*)(\[\])?\s*-->\s*$/);
      if (m) pending = { type: m[1], list: !!m[2], line: i + 1 };
      else errors.push(`${file}:${i + 1}: malformed envoy marker (expected <!-- envoy: full.proto.Message --> or ...[] -->)`);
    }
  }
  if (pending) errors.push(`${file}:${pending.line}: the envoy marker is not followed by a \`\`\`yaml block`);
  return snippets;
}

// Walks one snippet's YAML against its message. `report` gets {kind: "error" | "info", line, text}.
class Walker {
  constructor(root, tables, lineOf, report) {
    Object.assign(this, { root, tables, lineOf, report });
    this.fieldIndex = new Map(); // message -> Map(proto or JSON name -> field)
    this.anys = new Set(); // the maps that are an Any's: their @type is no field
  }

  error(node, text) { this.report({ kind: "error", line: this.lineOf(node), text }); }

  info(node, shape, parentEnvoy) {
    if (parentEnvoy && shape.envoy === parentEnvoy) return; // said once, for the field that holds it
    const was = shape.retyped ? `; the bundled API has an older type for it` : "";
    this.report({ kind: "info", line: this.lineOf(node), text: `${shape.name} is newer than the bundled API (Envoy ${shape.envoy}${was})` });
  }

  fieldsOf(type) {
    let index = this.fieldIndex.get(type);
    if (!index) {
      index = new Map();
      for (const f of type.fieldsArray) {
        index.set(f.name, f);
        index.set(f.options?.json_name ?? jsonName(f.name), f);
      }
      this.fieldIndex.set(type, index);
    }
    return index;
  }

  // A field's value: a list, a map or one value, as its shape says.
  value(shape, node, path, parentEnvoy) {
    node = isAlias(node) ? node.resolve(this.doc) : node;
    if (node == null || (isScalar(node) && node.value === null)) return; // `key:` with nothing: the field stays unset
    const kind = kindOf(node);
    if (shape.repeated) {
      if (!isSeq(node)) return this.error(node, `${shape.name} is a repeated field: expected a list, found ${kind} (path ${path})`);
      node.items.forEach((item, i) => this.one(shape.target, item, `${path}[${i}]`, parentEnvoy));
    } else if (shape.map) {
      if (!isMap(node)) return this.error(node, `${shape.name} is a map field: expected a map, found ${kind} (path ${path})`);
      for (const pair of node.items) {
        const key = String(pair.key?.value);
        this.one(shape.target, pair.value, /^\w+$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, parentEnvoy);
      }
    } else {
      this.one(shape.target, node, path, parentEnvoy);
    }
  }

  // One value of a message, enum or scalar type.
  one(target, node, path, parentEnvoy) {
    node = isAlias(node) ? node.resolve(this.doc) : node;
    if (node == null || (isScalar(node) && node.value === null)) return;
    const kind = kindOf(node);
    const at = path ? ` (path ${path})` : "";
    if (target === "scalar") {
      if (!isScalar(node)) this.error(node, `expected a scalar, found ${kind}${at}`);
    } else if (target instanceof protobuf.Enum) {
      const ok = isScalar(node) && (Object.hasOwn(target.values, node.value) || Object.values(target.values).includes(node.value));
      if (!ok) this.error(node, `${fullName(target)} has no value ${isScalar(node) ? `'${node.value}'` : kind}${at}` +
        ` (one of ${Object.keys(target.values).join(", ")})`);
    } else if (target.newer) {
      this.message(target.newer, (key) => byName(target.fields, key), node, path, parentEnvoy);
    } else {
      this.typed(target, node, path, at, kind);
    }
  }

  // A message of the bundled API, with the well-known types' JSON forms.
  typed(type, node, path, at, kind) {
    const name = fullName(type);
    switch (name) {
      case "google.protobuf.Any":
        return this.any(node, path, at, kind);
      case "google.protobuf.Duration":
        if (!isScalar(node) || !/^-?\d+(\.\d{1,9})?s$/.test(String(node.value))) {
          this.error(node, `a google.protobuf.Duration is a string of seconds such as "0.25s"${at}`);
        }
        return;
      case "google.protobuf.Value": // any JSON value
        return;
      case "google.protobuf.Struct": // a JSON object, whatever is in it
        if (!isMap(node)) this.error(node, `${name} is a map, found ${kind}${at}`);
        return;
      case "google.protobuf.ListValue":
        if (!isSeq(node)) this.error(node, `${name} is a list, found ${kind}${at}`);
        return;
    }
    if (WRAPPERS.has(name) || name === "google.protobuf.Timestamp" || name === "google.protobuf.FieldMask") {
      if (!isScalar(node)) this.error(node, `${name} is written as a scalar, found ${kind}${at}`);
      return;
    }
    const newer = this.tables.fields.get(name);
    const fields = this.fieldsOf(type);
    this.message(name, (key) => {
      const listed = newer && byName(newer, key);
      if (listed) return listed; // a retyped field's newer type wins
      const f = fields.get(key);
      return f && { repeated: f.repeated && !f.map, map: f.map, target: f.resolvedType ?? "scalar", name: `${name}.${f.name}`, oneof: f.partOf };
    }, node, path);
  }

  // The keys of a message: `lookup` gives each key's shape, or nothing for an unknown field.
  message(name, lookup, node, path, parentEnvoy) {
    if (!isMap(node)) {
      return this.error(node, `${name} is written as a map of its fields, found ${isSeq(node) ? "a list" : "a scalar"}${path ? ` (path ${path})` : ""}`);
    }
    const oneofs = new Map(); // oneof -> the key that set it
    for (const pair of node.items) {
      const key = String(pair.key?.value);
      const keyPath = path ? `${path}.${key}` : key;
      if (key === "@type" && this.anys.has(node)) continue;
      const shape = lookup(key);
      if (!shape) {
        this.error(pair.key, `${name} has no field '${key}' (path ${keyPath})`);
        continue;
      }
      if (shape.envoy) this.info(pair.key, shape, parentEnvoy);
      const oneof = shape.oneof;
      if (oneof && !(oneof.name.startsWith("_") && oneof.fieldsArray.length === 1)) { // not a proto3 `optional`
        if (oneofs.has(oneof)) this.error(pair.key, `${name}: '${key}' and '${oneofs.get(oneof)}' are both in oneof ${oneof.name} (path ${keyPath})`);
        else oneofs.set(oneof, key);
      }
      this.value(shape, pair.value, keyPath, shape.envoy ?? parentEnvoy);
    }
  }

  // google.protobuf.Any: the message named by @type, beside it (or under `value` for a special JSON type).
  any(node, path, at, kind) {
    if (!isMap(node)) return this.error(node, `expected a google.protobuf.Any (a map with @type), found ${kind}${at}`);
    const typePair = node.items.find((p) => p.key?.value === "@type");
    if (!typePair) return this.error(node, `google.protobuf.Any without @type${at}`);
    const url = String(typePair.value?.value ?? "");
    const name = url.slice(url.lastIndexOf("/") + 1);
    const type = this.root.lookup(name);
    if (!(type instanceof protobuf.Type)) {
      if (this.tables.types[name]) {
        this.report({ kind: "info", line: this.lineOf(typePair.value), text: `${name} is newer than the bundled API (Envoy ${this.tables.types[name]}): its fields are not checked` });
      } else {
        this.error(typePair.value, `unknown @type ${url}: no message ${name} in the bundled API${at}`);
      }
      return;
    }
    if (SPECIAL_JSON.has(name)) {
      for (const p of node.items) if (p.key?.value !== "@type" && p.key?.value !== "value") this.error(p.key, `${name} in an Any has only 'value'${at}`);
      const value = node.items.find((p) => p.key?.value === "value")?.value;
      return this.typed(type, value, `${path}.value`, ` (path ${path}.value)`, kindOf(value));
    }
    this.anys.add(node);
    this.typed(type, node, path, at, kind);
  }

  // A whole snippet: its root message, or a list of them.
  snippet(doc, typeName, list) {
    this.doc = doc;
    const type = this.root.lookup(typeName);
    const root = doc.contents;
    if (root == null || (isScalar(root) && root.value === null)) return this.error(root, "the snippet is empty");
    if (list !== isSeq(root)) {
      return this.error(root, list ? `the marker says a list of ${typeName} ([]), but the YAML is no list`
        : `the YAML is a list: mark it ${typeName}[] if it is a list of ${typeName}`);
    }
    this.value({ repeated: list, map: false, target: type, name: typeName }, root, "");
  }
}

// Checks every snippet of the files; returns {checked, failed}. Prints as described at the top.
export function checkFiles(files, root, tables, out = console.log, err = console.error) {
  let checked = 0;
  let failed = 0;
  for (const file of files) {
    const markerErrors = [];
    const snippets = findSnippets(fs.readFileSync(file, "utf8"), file, markerErrors);
    // A marker without its block counts as a snippet that failed: it was meant to check something.
    for (const e of markerErrors) err(e);
    checked += markerErrors.length;
    failed += markerErrors.length;
    for (const s of snippets) {
      checked++;
      const errors = [];
      const infos = [];
      const lineCounter = new LineCounter();
      const doc = YAML.parseDocument(s.yaml, { lineCounter });
      if (!(root.lookup(s.type) instanceof protobuf.Type)) {
        errors.push(`${file}:${s.line}: the marker names ${s.type}, which is no message of the bundled API`);
      } else if (doc.errors.length) {
        const e = doc.errors[0];
        errors.push(`${file}:${s.fenceLine + (e.linePos?.[0]?.line ?? 1)}: YAML: ${e.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "")}`);
      } else {
        const lineOf = (node) => s.fenceLine + (node?.range ? lineCounter.linePos(node.range[0]).line : 1);
        new Walker(root, tables, lineOf, ({ kind, line, text }) => (kind === "error" ? errors : infos).push(`${file}:${line}: ${text}`))
          .snippet(doc, s.type, s.list);
      }
      const type = s.type + (s.list ? "[]" : "");
      for (const i of infos) out(`  info: ${i}`);
      if (errors.length) {
        failed++;
        out(`FAIL ${file}:${s.fenceLine} ${type}`);
        for (const e of errors) err(e);
      } else {
        out(`ok ${file}:${s.fenceLine} ${type}`);
      }
    }
  }
  out(`${checked} snippets checked, ${failed} failed`);
  return { checked, failed };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const files = process.argv.slice(2);
  if (!files.length || files.some((f) => f.startsWith("-"))) {
    console.error("usage: check_envoy_snippets.mjs FILE.md...");
    process.exit(2);
  }
  let root;
  let tables;
  try {
    ({ root } = loadProtos());
    tables = verifyTables(root);
    for (const f of files) fs.accessSync(f, fs.constants.R_OK);
  } catch (e) {
    console.error(`check_envoy_snippets: ${e.message}`);
    process.exit(2);
  }
  const { failed } = checkFiles(files, root, tables);
  process.exit(failed ? 1 : 0);
}
