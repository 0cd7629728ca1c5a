// Validates Kubernetes manifests against the Kubernetes API schema (kubernetes-models' JSON
// schemas), plus the cross-references a schema cannot see: a DaemonSet's selector matches its pod
// labels, every volumeMount names a volume, a Service selects the pods and targets a named port.
// Then checks the validator itself refuses broken copies (a wrong type, a missing required
// field), so a pass means something. kubernetes-models' schemas, like the API's OpenAPI schema,
// do not refuse unknown fields (the API server's strict field validation does): a misspelt
// optional field is not caught here.
//
//   node validate.mjs FILE.yaml...      exit 0: every document is valid; else the errors, exit 1

import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const failures = [];
const fail = (where, message) => failures.push(`${where}: ${message}`);

async function model(doc) {
  const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : [null, doc.apiVersion];
  const path = group ? `kubernetes-models/${group}/${version}/${doc.kind}` : `kubernetes-models/${version}/${doc.kind}`;
  const mod = await import(path);
  return mod[doc.kind];
}

async function schemaErrors(doc) {
  try {
    const Model = await model(doc);
    new Model(doc).validate();
    return null;
  } catch (e) {
    return String(e.message ?? e);
  }
}

function crossReferences(where, docs) {
  const pods = [];
  for (const d of docs) {
    if (d.kind !== "DaemonSet" && d.kind !== "Deployment") continue;
    const labels = d.spec.template.metadata?.labels ?? {};
    for (const [k, v] of Object.entries(d.spec.selector.matchLabels ?? {}))
      if (labels[k] !== v) fail(where, `${d.kind} ${d.metadata.name}: selector ${k}=${v} does not match the pod labels`);
    const pod = d.spec.template.spec;
    const volumes = new Set((pod.volumes ?? []).map((v) => v.name));
    for (const c of [...(pod.initContainers ?? []), ...pod.containers])
      for (const m of c.volumeMounts ?? [])
        if (!volumes.has(m.name)) fail(where, `container ${c.name} mounts ${m.name}, which is not a volume`);
    pods.push({ namespace: d.metadata.namespace, labels, ports: pod.containers.flatMap((c) => c.ports ?? []) });
  }
  for (const s of docs.filter((d) => d.kind === "Service")) {
    const target = pods.find((p) => p.namespace === s.metadata.namespace &&
      Object.entries(s.spec.selector ?? {}).every(([k, v]) => p.labels[k] === v));
    if (!target) {
      fail(where, `Service ${s.metadata.name} selects no pod of these manifests`);
      continue;
    }
    for (const port of s.spec.ports)
      if (typeof port.targetPort === "string" && !target.ports.some((p) => p.name === port.targetPort))
        fail(where, `Service ${s.metadata.name}: targetPort ${port.targetPort} is no container port's name`);
  }
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml...");
  process.exit(2);
}
let checked = 0;
for (const file of files) {
  const parsed = parseAllDocuments(readFileSync(file, "utf8"));
  const docs = [];
  for (const [i, p] of parsed.entries()) {
    if (p.errors.length) fail(`${file} document ${i + 1}`, p.errors.map((e) => e.message).join("; "));
    const doc = p.toJS();
    if (doc === null) continue;
    docs.push(doc);
    const where = `${file}: ${doc.kind} ${doc.metadata?.name}`;
    const err = await schemaErrors(doc);
    if (err) fail(where, err);
    ++checked;
  }
  crossReferences(file, docs);

  // The validator must refuse what the API server would: a wrong type, a missing required field.
  const ds = docs.find((d) => d.kind === "DaemonSet");
  if (ds) {
    const wrongType = structuredClone(ds);
    wrongType.spec.template.spec.containers[0].ports = "9400";
    const noName = structuredClone(ds);
    delete noName.spec.template.spec.containers[0].name;
    for (const [what, bad] of [["a wrong type", wrongType], ["a container without a name", noName]])
      if (!(await schemaErrors(bad))) fail(file, `the validator accepted a DaemonSet with ${what}`);
  }
}
if (failures.length) {
  for (const f of failures) console.error(f);
  process.exit(1);
}
console.log(`${checked} Kubernetes object(s) valid: ${files.join(" ")}`);
