// Runs one benchmark case on ONNX Runtime's CPU provider (npm onnxruntime-node) and times it.
//
// usage: node ort_run.js CASE_DIR --runs N --warmup-ms MS --threads T --output FILE [--profile PREFIX]
//
// CASE_DIR holds model.onnx and inputs.json (written by export_models.py), whose inputs are ONNX TensorProto
// files: the same bytes kiln reads with --loadInputs. Warm-up: at least one run, then until MS passed; then N
// timed runs. Prints `ort: median_ms=... mean_ms=... runs=N` and writes the last run's outputs as JSON in the
// layout of `kiln exec --exportOutput` ([{name, dimensions, values}]). --profile writes ONNX Runtime's per-node profile
// of the warm-up and timed runs (Chrome trace JSON) to a file named PREFIX_<date>.json (ort_profile.py sums it per operator).
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
  try {
    return require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    console.error('ort_run: onnxruntime-node is not installed in benchmarks/cpu/node_modules; ' +
                  'run scripts/install-bench-deps (' + e.message.split('\n')[0] + ')');
    process.exit(2);
  }
}

function parseArgs(argv) {
  const args = {caseDir: argv[0], runs: 10, warmupMs: 500, threads: 2, output: '', profile: ''};
  for (let i = 1; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (key === '--runs') args.runs = Number(value);
    else if (key === '--warmup-ms') args.warmupMs = Number(value);
    else if (key === '--threads') args.threads = Number(value);
    else if (key === '--output') args.output = value;
    else if (key === '--profile') args.profile = value;
    else throw new Error(`unknown argument '${key}'`);
  }
  if (!args.caseDir || !(args.runs >= 1)) throw new Error('usage: node ort_run.js CASE_DIR [--runs N] ...');
  return args;
}

// The few TensorProto fields numpy_helper.from_array writes: dims (1), data_type (2), name (8), raw_data (9).
function readVarint(buf, pos) {
  let value = 0, scale = 1, byte;
  do {
    byte = buf[pos++];
    value += (byte & 0x7f) * scale;
    scale *= 128;
  } while (byte & 0x80);
  return [value, pos];
}

function readTensorProto(file) {
  const buf = fs.readFileSync(file);
  const t = {dims: [], dataType: 0, name: '', raw: null};
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Math.floor(key / 8), wire = key & 7;
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      if (field === 1) t.dims.push(v);
      else if (field === 2) t.dataType = v;
    } else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      const bytes = buf.subarray(pos, pos + len);
      pos += len;
      if (field === 1) {  // packed dims
        for (let p = 0; p < bytes.length;) {
          let v;
          [v, p] = readVarint(bytes, p);
          t.dims.push(v);
        }
      } else if (field === 8) {
        t.name = bytes.toString('utf8');
      } else if (field === 9) {
        t.raw = bytes;
      }
    } else if (wire === 5) {
      pos += 4;
    } else if (wire === 1) {
      pos += 8;
    } else {
      throw new Error(`${file}: unexpected protobuf wire type ${wire}`);
    }
  }
  if (!t.raw) throw new Error(`${file}: tensor has no raw_data (write it with numpy_helper.from_array)`);
  return t;
}

const TYPES = {1: ['float32', Float32Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array],
               11: ['float64', Float64Array]};

function toOrtTensor(ort, t, file) {
  const type = TYPES[t.dataType];
  if (!type) throw new Error(`${file}: ONNX data type ${t.dataType} is not supported here`);
  const [name, Array] = type;
  const copy = new Uint8Array(t.raw);  // aligned copy
  return new ort.Tensor(name, new Array(copy.buffer, 0, copy.length / Array.BYTES_PER_ELEMENT), t.dims);
}

function stats(times) {
  const s = [...times].sort((a, b) => a - b);
  const mid = (s.length - 1) / 2;
  return {median: (s[Math.floor(mid)] + s[Math.ceil(mid)]) / 2, mean: s.reduce((a, b) => a + b, 0) / s.length};
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const manifest = JSON.parse(fs.readFileSync(path.join(args.caseDir, 'inputs.json'), 'utf8'));
  const feeds = {};
  for (const input of manifest.inputs) {
    const file = path.join(args.caseDir, input.file);
    feeds[input.name] = toOrtTensor(ort, readTensorProto(file), file);
  }
  const session = await ort.InferenceSession.create(path.join(args.caseDir, 'model.onnx'), {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    ...(args.profile ? {enableProfiling: true, profileFilePrefix: args.profile} : {}),
  });
  let outputs;
  const warm0 = performance.now();
  do {
    outputs = await session.run(feeds);
  } while (performance.now() - warm0 < args.warmupMs);
  const times = [];
  for (let i = 0; i < args.runs; ++i) {
    const t0 = performance.now();
    outputs = await session.run(feeds);
    times.push(performance.now() - t0);
  }
  if (args.profile) session.endProfiling();
  const {median, mean} = stats(times);
  console.log(`ort: onnxruntime-node ${ort.env.versions.node} median_ms=${median.toFixed(3)} ` +
              `mean_ms=${mean.toFixed(3)} runs=${times.length}`);
  if (args.output) {
    const out = session.outputNames.map((name) => ({
      name,
      dimensions: outputs[name].dims.map(Number),
      values: Array.from(outputs[name].data, Number),
    }));
    fs.writeFileSync(args.output, JSON.stringify(out));
  }
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
