// Reference outputs from ONNX Runtime (CPU) for the cached OCR models.
//
// For each case: build a seeded, deterministic synthetic input (own PRNG, so the bytes are the same on every machine),
// run ONNX Runtime on the CPU, and write
//   <out>/<case>/input_<name>.npy, <out>/<case>/output_<name>.npy   (NumPy format 1.0, '<f4', C order)
//   <out>/<case>/meta.json
// Names are sanitized to [A-Za-z0-9_.-] (anything else becomes '_').
//
// Usage: node ort_reference.mjs --models DIR --ort DIR --out DIR [--cases a,b] [--threads N]
//                               [--opt-level disabled|basic|extended|all] [--no-opt-check]
//   --ort DIR   directory whose node_modules/ holds onnxruntime-node (reference-outputs.sh installs it there)
//
// Normally run through scripts/models/reference-outputs.sh.

import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const GENERATOR_VERSION = 1; // bump when the input generator changes (it changes the bytes of every input)

// ---------------------------------------------------------------------------------------------------------------
// The DB probability map saturates: ~95% of it is exactly 0.0 or 1.0 (ORT's float32 sigmoid gives exactly 0 or 1 once
// |logit| > ~17, and the logits reach +-130), so it hides small numeric errors. For the detector we therefore also fetch the pre-sigmoid logits (an intermediate value, made a graph
// output by EXTRA_OUTPUTS) and write them as output_<name>.npy too; meta.json marks them "intermediate": true.
// Each entry: value name and its dims (numbers, or strings for symbolic dims).
const EXTRA_OUTPUTS = { 'ppocrv4_det.onnx': [{ name: 'p2o.Add.281', dims: ['N', 1, 'H', 'W'] }] }; // Add(ConvT, b) -> Sigmoid
const extraNames = (model) => (EXTRA_OUTPUTS[model] || []).map((e) => e.name);

// Cases. Shapes are NCHW. 'gen' picks the synthetic image and 'norm' the model's own preprocessing.
const CASES = {
  det_640: { model: 'ppocrv4_det.onnx', shape: [1, 3, 640, 640], seed: 0x51d0640, gen: 'document', norm: 'imagenet' },
  det_480x800: { model: 'ppocrv4_det.onnx', shape: [1, 3, 480, 800], seed: 0x51d0480, gen: 'document', norm: 'imagenet' },
  // uniform noise in [-1, 1]: not image-like (the map is ~all zero), but it exercises other value ranges
  det_320_noise: { model: 'ppocrv4_det.onnx', shape: [1, 3, 320, 320], seed: 0x51d0320, gen: 'uniform', norm: null },
  cls: { model: 'ppocr_cls.onnx', shape: [1, 3, 48, 192], seed: 0xc150001, gen: 'textline', norm: 'half' },
  cls_b4: { model: 'ppocr_cls.onnx', shape: [4, 3, 48, 192], seed: 0xc150004, gen: 'textline', norm: 'half' },
};

// PaddleOCR preprocessing: det = NormalizeImage(scale 1/255, ImageNet mean/std); cls = (x/255 - 0.5) / 0.5.
const NORMS = {
  imagenet: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] },
  half: { mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] },
};

// ---------------------------------------------------------------------------------------------------------------
// PRNG: mulberry32 (32-bit state, uses only Math.imul and integer ops, so it is exact and portable).
function mulberry32(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    u32: next,
    uniform: () => next() / 4294967296, // [0, 1)
    int: (lo, hi) => lo + Math.floor((next() / 4294967296) * (hi - lo + 1)), // [lo, hi]
  };
}

const clamp8 = (v) => (v < 0 ? 0 : v > 255 ? 255 : v);

// An 8-bit RGB image (HWC) that looks a little like text: a light, noisy, slightly shaded page and dark "glyphs"
// made of strokes, grouped in lines. Everything is integer arithmetic on the PRNG output.
class Canvas {
  constructor(h, w) {
    this.h = h;
    this.w = w;
    this.px = new Uint8Array(h * w * 3);
  }
  fillRect(y0, x0, hh, ww, rgb) {
    const y1 = Math.min(this.h, y0 + hh), x1 = Math.min(this.w, x0 + ww);
    for (let y = Math.max(0, y0); y < y1; y++)
      for (let x = Math.max(0, x0); x < x1; x++) {
        const o = (y * this.w + x) * 3;
        this.px[o] = rgb[0];
        this.px[o + 1] = rgb[1];
        this.px[o + 2] = rgb[2];
      }
  }
}

function paintBackground(c, rng) {
  const base = [rng.int(190, 245), rng.int(190, 245), rng.int(190, 245)];
  const gy = rng.int(-30, 30), gx = rng.int(-30, 30); // linear shading over the page
  for (let y = 0; y < c.h; y++)
    for (let x = 0; x < c.w; x++) {
      const shade = Math.floor((gy * y) / c.h + (gx * x) / c.w);
      const noise = rng.int(-12, 12);
      const o = (y * c.w + x) * 3;
      for (let k = 0; k < 3; k++) c.px[o + k] = clamp8(base[k] + shade + noise);
    }
}

// One line of glyphs with height lh starting at (y, x) and at most len pixels long.
function paintTextLine(c, rng, y, x, lh, len) {
  const ink = [rng.int(0, 90), rng.int(0, 90), rng.int(0, 90)];
  const th = Math.max(1, Math.floor(lh / 7)); // stroke thickness
  const end = Math.min(c.w, x + len);
  let cx = x;
  while (cx < end - Math.floor(lh / 3)) {
    const gw = Math.max(3, Math.floor(lh * (0.45 + 0.5 * rng.uniform())));
    const strokes = rng.int(2, 5);
    for (let s = 0; s < strokes; s++) {
      const col = [clamp8(ink[0] + rng.int(-15, 15)), clamp8(ink[1] + rng.int(-15, 15)), clamp8(ink[2] + rng.int(-15, 15))];
      if (rng.uniform() < 0.5) c.fillRect(y + rng.int(0, lh - th), cx, th, gw, col); // horizontal stroke
      else c.fillRect(y, cx + rng.int(0, gw - th), lh, th, col); // vertical stroke
    }
    cx += gw + rng.int(1, Math.max(2, Math.floor(lh / 4)));
    if (rng.uniform() < 0.12) cx += rng.int(Math.floor(lh / 2), lh); // word gap
  }
}

function genDocument(h, w, rng) {
  const c = new Canvas(h, w);
  paintBackground(c, rng);
  let y = rng.int(4, 24);
  while (y < h - 12) {
    const lh = rng.int(10, Math.max(11, Math.floor(h / 20)));
    if (y + lh >= h) break;
    if (rng.uniform() < 0.8) {
      const x = rng.int(0, Math.floor(w / 3));
      paintTextLine(c, rng, y, x, lh, rng.int(Math.floor(w / 6), w - x));
    }
    y += lh + rng.int(Math.floor(lh / 2), 3 * lh);
  }
  // a few dark blobs that are not text
  const blobs = rng.int(1, 3);
  for (let i = 0; i < blobs; i++)
    c.fillRect(rng.int(0, h - 1), rng.int(0, w - 1), rng.int(8, 60), rng.int(8, 60), [rng.int(0, 255), rng.int(0, 255), rng.int(0, 255)]);
  return c;
}

function genTextLine(h, w, rng) {
  const c = new Canvas(h, w);
  paintBackground(c, rng);
  const lh = rng.int(Math.floor(h * 0.45), Math.floor(h * 0.75));
  paintTextLine(c, rng, rng.int(2, h - lh - 2), rng.int(0, 12), lh, rng.int(Math.floor(w / 2), w));
  return c;
}

const GENERATORS = { document: genDocument, textline: genTextLine };

function makeInput(cs) {
  const [n, ch, h, w] = cs.shape;
  if (ch !== 3) throw new Error(`expected 3 channels, got shape ${cs.shape}`);
  const rng = mulberry32(cs.seed);
  const out = new Float32Array(n * ch * h * w);
  if (cs.gen === 'uniform') {
    for (let i = 0; i < out.length; i++) out[i] = 2 * rng.uniform() - 1; // [-1, 1) in double; may round to 1.0 in float32
    return out;
  }
  const { mean, std } = NORMS[cs.norm];
  for (let b = 0; b < n; b++) {
    const img = GENERATORS[cs.gen](h, w, rng);
    for (let k = 0; k < 3; k++) {
      const base = (b * 3 + k) * h * w;
      for (let i = 0; i < h * w; i++) out[base + i] = (img.px[i * 3 + k] / 255 - mean[k]) / std[k];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// .npy writer: format 1.0, little-endian float32, C order. Header padded with spaces to a multiple of 64 bytes
// (including the 10-byte preamble) and terminated by '\n', as NumPy writes it.
export function npyBytes(data, shape) {
  const count = shape.reduce((a, b) => a * b, 1);
  if (count !== data.length) throw new Error(`npy: shape ${shape} has ${count} elements, data ${data.length}`);
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  if (header.length > 65535) throw new Error('npy: header too long');
  const buf = Buffer.alloc(10 + header.length + 4 * count);
  buf.write('\x93NUMPY', 0, 'latin1');
  buf[6] = 1;
  buf[7] = 0;
  buf.writeUInt16LE(header.length, 8);
  buf.write(header, 10, 'latin1');
  const dv = new DataView(buf.buffer, buf.byteOffset + 10 + header.length, 4 * count);
  for (let i = 0; i < count; i++) dv.setFloat32(4 * i, data[i], true);
  return buf;
}

// ---------------------------------------------------------------------------------------------------------------
// Make intermediate values graph outputs by editing the ModelProto bytes: parse the top-level fields, append
// GraphProto.output (field 12) entries (ValueInfoProto: float tensor of the given dims) to ModelProto.graph (field 7).
function readVarint(b, pos) {
  let v = 0, mul = 1, byte;
  do {
    if (pos >= b.length) throw new Error('protobuf: truncated varint');
    byte = b[pos++];
    v += (byte & 0x7f) * mul;
    mul *= 128;
  } while (byte & 0x80);
  return [v, pos];
}
function varint(v) {
  const out = [];
  while (v >= 0x80) { out.push((v % 128) | 0x80); v = Math.floor(v / 128); }
  out.push(v);
  return Buffer.from(out);
}
const lenField = (field, payload) => Buffer.concat([varint(field * 8 + 2), varint(payload.length), payload]);

export function addGraphOutputs(model, outputs) {
  const parts = [];
  let pos = 0, found = false;
  while (pos < model.length) {
    const start = pos;
    let key;
    [key, pos] = readVarint(model, pos);
    const field = Math.floor(key / 8), wire = key & 7;
    if (wire === 0) [, pos] = readVarint(model, pos);
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      let len;
      [len, pos] = readVarint(model, pos);
      if (field === 7) {
        if (found) throw new Error('protobuf: two graph fields');
        found = true;
        const outs = outputs.map(({ name, dims }) => {
          // TensorShapeProto.dim (1): Dimension{dim_value (1, varint) | dim_param (2, string)}
          const shape = Buffer.concat(dims.map((d) => lenField(1, typeof d === 'number'
            ? Buffer.concat([varint(1 * 8 + 0), varint(d)]) : lenField(2, Buffer.from(d, 'utf8')))));
          // TypeProto.tensor_type (1): Tensor{elem_type (1) = FLOAT (1), shape (2)}
          const type = lenField(1, Buffer.concat([varint(1 * 8 + 0), varint(1), lenField(2, shape)]));
          // ValueInfoProto{name (1), type (2)}
          return lenField(12, Buffer.concat([lenField(1, Buffer.from(name, 'utf8')), lenField(2, type)]));
        });
        parts.push(lenField(7, Buffer.concat([model.subarray(pos, pos + len), ...outs])));
        pos += len;
        continue;
      }
      pos += len;
    } else throw new Error(`protobuf: unsupported wire type ${wire}`);
    if (pos > model.length) throw new Error('protobuf: truncated field');
    parts.push(model.subarray(start, pos));
  }
  if (!found) throw new Error('protobuf: no graph in model');
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------------------------
const sanitize = (name) => name.replace(/[^A-Za-z0-9_.-]/g, '_');
const sha256 = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

function stats(a) {
  let mn = Infinity, mx = -Infinity, sum = 0, nonFinite = 0;
  for (let i = 0; i < a.length; i++) {
    const v = a[i];
    if (!Number.isFinite(v)) { nonFinite++; continue; }
    if (v < mn) mn = v;
    if (v > mx) mx = v;
    sum += v;
  }
  return { min: mn, max: mx, mean: sum / Math.max(1, a.length - nonFinite), non_finite: nonFinite };
}

function maxAbsDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

function parseArgs(argv) {
  const args = { cases: Object.keys(CASES), threads: 2, optLevel: 'disabled', optCheck: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--models') args.models = val();
    else if (a === '--ort') args.ort = val();
    else if (a === '--out') args.out = val();
    else if (a === '--cases') args.cases = val().split(',').filter(Boolean);
    else if (a === '--threads') args.threads = parseInt(val(), 10);
    else if (a === '--opt-level') args.optLevel = val();
    else if (a === '--no-opt-check') args.optCheck = false;
    else throw new Error(`unknown argument '${a}'`);
  }
  for (const k of ['models', 'ort', 'out']) if (!args[k]) throw new Error(`--${k} is required`);
  for (const c of args.cases) if (!CASES[c]) throw new Error(`unknown case '${c}' (known: ${Object.keys(CASES).join(', ')})`);
  if (!['disabled', 'basic', 'extended', 'all'].includes(args.optLevel)) throw new Error(`bad --opt-level ${args.optLevel}`);
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const require = createRequire(path.join(path.resolve(args.ort), 'node_modules', '_'));
  let ort, ortVersion;
  try {
    ort = require('onnxruntime-node');
    ortVersion = require('onnxruntime-node/package.json').version;
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node from ${args.ort}/node_modules: ${e.message}`);
  }

  const sessions = new Map();
  const session = async (model, level) => {
    const key = `${model}|${level}`;
    if (!sessions.has(key)) {
      const file = path.join(args.models, model);
      if (!fs.existsSync(file)) throw new Error(`model ${file} not found (run scripts/models/fetch-ocr-models.sh)`);
      const extra = EXTRA_OUTPUTS[model] || [];
      const bytes = extra.length ? addGraphOutputs(fs.readFileSync(file), extra) : fs.readFileSync(file);
      sessions.set(key, await ort.InferenceSession.create(bytes, {
        executionProviders: ['cpu'],
        graphOptimizationLevel: level,
        intraOpNumThreads: args.threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
      }));
    }
    return sessions.get(key);
  };

  fs.mkdirSync(args.out, { recursive: true });
  for (const name of args.cases) {
    const cs = CASES[name];
    const t0 = performance.now();
    const modelFile = path.join(args.models, cs.model);
    const sess = await session(cs.model, args.optLevel);
    if (sess.inputNames.length !== 1) throw new Error(`${cs.model}: expected 1 input, got ${sess.inputNames}`);
    const inName = sess.inputNames[0];
    const x = makeInput(cs);
    const feeds = { [inName]: new ort.Tensor('float32', x, cs.shape) };
    const tRun = performance.now();
    const res = await sess.run(feeds);
    const runMs = performance.now() - tRun;

    let optCheck;
    if (args.optCheck) {
      const other = args.optLevel === 'all' ? 'disabled' : 'all';
      const res2 = await (await session(cs.model, other)).run(feeds);
      optCheck = { other_level: other, max_abs_diff: {} };
      for (const o of sess.outputNames) optCheck.max_abs_diff[o] = maxAbsDiff(res[o].data, res2[o].data);
    }

    // write into a scratch dir, then swap it in, so a reader never sees a half-written case
    const dir = path.join(args.out, name);
    const tmp = `${dir}.tmp-${process.pid}`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp, { recursive: true });
    const inFile = `input_${sanitize(inName)}.npy`;
    fs.writeFileSync(path.join(tmp, inFile), npyBytes(x, cs.shape));
    const outputs = [];
    for (const o of sess.outputNames) {
      const t = res[o];
      if (t.type !== 'float32') throw new Error(`${name}: output ${o} has type ${t.type}, expected float32`);
      const file = `output_${sanitize(o)}.npy`;
      fs.writeFileSync(path.join(tmp, file), npyBytes(t.data, t.dims.map(Number)));
      const intermediate = extraNames(cs.model).includes(o);
      outputs.push({ name: o, file, shape: t.dims.map(Number), dtype: 'float32', intermediate, ...stats(t.data) });
    }
    const meta = {
      case: name,
      model: cs.model,
      model_sha256: sha256(modelFile),
      // intermediate values fetched as extra outputs (the file is unchanged; only the in-memory copy run by ORT)
      extra_outputs: extraNames(cs.model),
      inputs: [{
        name: inName, file: inFile, shape: cs.shape, dtype: 'float32', ...stats(x),
        generator: { kind: cs.gen === 'uniform' ? 'uniform[-1,1]' : cs.gen, version: GENERATOR_VERSION, prng: 'mulberry32', seed: cs.seed },
        preprocessing: cs.norm ? { scale: '1/255', order: 'RGB planes (NCHW)', ...NORMS[cs.norm] } : null,
      }],
      outputs,
      onnxruntime: {
        package: 'onnxruntime-node', version: ortVersion, execution_provider: 'cpu',
        graph_optimization_level: args.optLevel, intra_op_threads: args.threads, run_ms: Math.round(runMs * 10) / 10,
        opt_level_check: optCheck,
      },
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
    };
    fs.writeFileSync(path.join(tmp, 'meta.json'), JSON.stringify(meta, null, 2) + '\n');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);

    const o0 = outputs[0];
    console.log(`${name}: ${cs.model} ${inName}${JSON.stringify(cs.shape)} -> ${o0.name}${JSON.stringify(o0.shape)} ` +
      `range [${o0.min.toPrecision(4)}, ${o0.max.toPrecision(4)}] mean ${o0.mean.toPrecision(4)}; ` +
      `run ${runMs.toFixed(0)} ms, total ${(performance.now() - t0).toFixed(0)} ms` +
      (optCheck ? `; max |diff| vs opt-level ${optCheck.other_level}: ${Object.values(optCheck.max_abs_diff).map((v) => v.toExponential(2)).join(',')}` : ''));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((e) => {
    console.error(`ort_reference: error: ${e.message}`);
    process.exit(1);
  });
}
