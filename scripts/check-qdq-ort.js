#!/usr/bin/env node
// ONNX Runtime against qdeploy's INT8 reference on a Q/DQ model written by `qdeploy export --target trt11`.
//
//   node scripts/check-qdq-ort.js make-input NAME 1x3x640x640 OUT.npy [SEED]   seeded uniform [0, 1) float32 input
//   node scripts/check-qdq-ort.js compare MODEL_QDQ.onnx NAME=IN.npy REF.npy [TOL]
//
// compare runs MODEL_QDQ.onnx in ONNX Runtime (CPU, the onnxruntime-node package: `npm install --ignore-scripts
// onnxruntime-node` in a scratch folder, NODE_PATH=that/node_modules) on IN.npy and compares its first output with
// REF.npy (`qdeploy run MODEL --precision int8 --calib-cache ... --input NAME=IN.npy --output-dir DIR`): it prints
// the largest difference relative to the reference's range and the share of elements off by more than 1% of it, and
// exits 1 when the largest relative difference exceeds TOL (default 0.05). Standard library + onnxruntime-node.
'use strict';
const fs = require('fs');

function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(path + ': not a .npy file');
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = (major === 1 ? 10 : 12) + hlen;
  const header = b.toString('latin1', major === 1 ? 10 : 12, off);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header)) {
    throw new Error(path + ': only little-endian float32 C-order arrays are read');
  }
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const n = shape.reduce((a, x) => a * x, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = b.readFloatLE(off + 4 * i);
  return { shape, data };
}

function writeNpy(path, shape, data) {
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape.join(', ') + (shape.length === 1 ? ',' : '') + '), }';
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const b = Buffer.alloc(10 + header.length + 4 * data.length);
  b.write('\x93NUMPY', 0, 'latin1');
  b[6] = 1; b[7] = 0;
  b.writeUInt16LE(header.length, 8);
  b.write(header, 10, 'latin1');
  for (let i = 0; i < data.length; ++i) b.writeFloatLE(data[i], 10 + header.length + 4 * i);
  fs.writeFileSync(path + '.tmp', b);
  fs.renameSync(path + '.tmp', path);
}

async function main() {
  const [cmd, ...args] = process.argv.slice(2);
  if (cmd === 'make-input' && args.length >= 3) {
    const shape = args[1].split('x').map(Number);
    let seed = Number(args[3] || 1) >>> 0;
    const n = shape.reduce((a, x) => a * x, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; ++i) {  // xorshift32: the same bytes on every machine
      seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
      data[i] = (seed >>> 8) / 16777216;
    }
    writeNpy(args[2], shape, data);
    return 0;
  }
  if (cmd !== 'compare' || args.length < 3) {
    console.error('usage: check-qdq-ort.js make-input NAME DIMS OUT.npy [SEED] | compare MODEL.onnx NAME=IN.npy REF.npy [TOL]');
    return 2;
  }
  const ort = require('onnxruntime-node');
  const [model, feed, refPath] = args;
  const tol = Number(args[3] || 0.05);
  const [name, inPath] = feed.split('=');
  const x = readNpy(inPath);
  const ref = readNpy(refPath);
  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'] });
  const out = await session.run({ [name]: new ort.Tensor('float32', x.data, x.shape) });
  const y = out[session.outputNames[0]].data;
  if (y.length !== ref.data.length) throw new Error('output has ' + y.length + ' values, the reference ' + ref.data.length);
  let lo = Infinity, hi = -Infinity, maxd = 0, over = 0;
  for (const v of ref.data) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const range = Math.max(hi - lo, 1e-12);
  for (let i = 0; i < y.length; ++i) {
    const d = Math.abs(y[i] - ref.data[i]);
    maxd = Math.max(maxd, d);
    if (d > 0.01 * range) ++over;
  }
  const rel = maxd / range;
  console.log(`onnxruntime ${require('onnxruntime-node/package.json').version}: ${y.length} values, reference range ` +
              `${range.toPrecision(6)}, max |diff| ${maxd.toPrecision(6)} (${(100 * rel).toFixed(4)}% of the range), ` +
              `${over} (${(100 * over / y.length).toFixed(4)}%) off by more than 1% of the range; tolerance ${100 * tol}%`);
  return rel <= tol ? 0 : 1;
}

main().then(rc => process.exit(rc), e => { console.error('error: ' + e.message); process.exit(2); });
