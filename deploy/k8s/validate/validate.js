#!/usr/bin/env node
// Offline validation of rendered Kubernetes manifests (multi-document YAML).
//
//   node validate.js FILE...      (NODE_PATH: the node_modules of package.json here)
//
// For every object:
//  1. schema: kubernetes-models' validator for its apiVersion/kind (types,
//     formats, required fields, enums). An apiVersion/kind the package does
//     not know is an error.
//  2. strict: every field must be one the schema defines. kubernetes-models'
//     validators allow unknown properties (as the API server does without
//     --validate=strict), so a misspelled `readinesProbe` would pass step 1
//     and be dropped silently by the cluster. The package ships its schemas
//     as compiled validators, not JSON, so the strict walk records which
//     properties the validator itself looks at: the object is wrapped in
//     proxies, the validator reads every property its schema defines (present
//     or not) at every level, and enumerates the keys of maps (labels,
//     resources.limits, ConfigMap data, ...). A key that exists in the object
//     but that the validator never read is unknown to the schema.
// Prints one line per problem (file, object, path, message) and exits 1 if
// there is any, 0 otherwise. Exit 2: bad usage or an unreadable file.
'use strict';

const fs = require('fs');
const YAML = require('yaml');

function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || typeof kind !== 'string' ||
      !/^[A-Za-z0-9.\-/]+$/.test(apiVersion) || !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  // Core group objects (apiVersion "v1") live under kubernetes-models/v1.
  const dir = apiVersion;
  try {
    const mod = require(`kubernetes-models/${dir}/${kind}`);
    return mod[kind] || null;
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND' && String(e.message).includes('kubernetes-models/')) {
      return null;
    }
    throw e;
  }
}

// Wraps `value` so that every property read and every key enumeration is
// recorded in `records` (raw object -> {read: Set, enumerated: bool}).
function track(value, records) {
  if (value === null || typeof value !== 'object') return value;
  let rec = records.get(value);
  if (!rec) {
    rec = {read: new Set(), enumerated: false, children: new Map()};
    records.set(value, rec);
  }
  return new Proxy(value, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof key !== 'string') return v;
      rec.read.add(key);
      if (v !== null && typeof v === 'object' &&
          Object.prototype.hasOwnProperty.call(target, key)) {
        if (!rec.children.has(key)) rec.children.set(key, track(v, records));
        return rec.children.get(key);
      }
      return v;
    },
    has(target, key) {
      if (typeof key === 'string') rec.read.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      rec.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

function editDistance(a, b) {
  const d = Array.from({length: a.length + 1}, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                         d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
  }
  return d[a.length][b.length];
}

function suggestion(key, known) {
  let best = null;
  let bestDistance = Infinity;
  for (const k of known) {
    const dist = editDistance(key.toLowerCase(), k.toLowerCase());
    if (dist < bestDistance) {
      best = k;
      bestDistance = dist;
    }
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(key.length / 3))
      ? ` (did you mean "${best}"?)` : '';
}

// Walks the raw object; reports keys the validator never read.
function unknownFields(value, path, records, out) {
  if (value === null || typeof value !== 'object') return;
  const rec = records.get(value);
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, `${path}/${i}`, records, out));
    return;
  }
  for (const key of Object.keys(value)) {
    const known = rec && (rec.enumerated || rec.read.has(key));
    if (!known) {
      const candidates = rec ? [...rec.read].filter((k) => !(k in value)) : [];
      out.push(`${path}/${key}: unknown field${suggestion(key, candidates)}`);
      continue;
    }
    unknownFields(value[key], `${path}/${key}`, records, out);
  }
}

function validateObject(obj) {
  const problems = [];
  const Model = modelFor(obj.apiVersion, obj.kind);
  if (!Model) {
    return [`apiVersion "${obj.apiVersion}" kind "${obj.kind}" is not a known Kubernetes type`];
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    problems.push(`schema: ${e.message}`);
  }
  const records = new Map();
  try {
    Model.prototype.validate.call(track(obj, records));
  } catch (e) {
    // Reported above; the walk below still has every property read.
  }
  const unknown = [];
  unknownFields(obj, '', records, unknown);
  for (const u of unknown) problems.push(`strict: ${u}`);
  return problems;
}

function main(argv) {
  const files = argv.slice(2);
  if (files.length === 0) {
    console.error('usage: validate.js FILE...  (multi-document YAML)');
    return 2;
  }
  let objects = 0;
  let failures = 0;
  for (const file of files) {
    let docs;
    try {
      // Kubernetes reads YAML 1.1 (sigs.k8s.io/yaml); parse the same way.
      docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'), {version: '1.1'});
    } catch (e) {
      console.error(`${file}: ${e.message}`);
      return 2;
    }
    docs.forEach((doc, index) => {
      if (doc.errors.length > 0) {
        console.log(`${file}: document ${index}: YAML: ${doc.errors[0].message}`);
        failures++;
        return;
      }
      const obj = doc.toJS();
      if (obj === null || obj === undefined) return;
      objects++;
      const name = `${obj.kind || '?'}/${(obj.metadata && obj.metadata.name) || '?'}`;
      for (const p of validateObject(obj)) {
        console.log(`${file}: ${name}: ${p}`);
        failures++;
      }
    });
  }
  if (failures > 0) {
    console.log(`validate.js: ${failures} problem(s) in ${objects} object(s)`);
    return 1;
  }
  console.log(`validate.js: ${objects} object(s) valid (schema + strict fields)`);
  return 0;
}

process.exitCode = main(process.argv);
