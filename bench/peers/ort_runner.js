// The ONNX Runtime side of the peer bench (bench/peer_bench.cc drives it; bench/peers/README.md).
// Usage: node ort_runner.js MODEL.onnx INPUT_DIR OUTPUT_DIR THREADS
// Loads MODEL with every graph optimisation and THREADS intra-op threads, reads each graph input
// from INPUT_DIR/<input name>.npy, runs once and writes each output to OUTPUT_DIR/output_<k>.npy
// (graph output order), prints "ready", then answers each "run N" line on stdin with one line of N
// wall times in milliseconds, and exits on "quit" or end of input.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const ort = require('onnxruntime-node');

const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12);
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const type = NPY_TYPES[descr];
  if (!type) throw new Error(`${file}: NumPy type ${descr} is not handled`);
  const data = buf.subarray(start + headerLen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  return new ort.Tensor(type[0], new type[1](copy.buffer), shape);
}

function writeNpy(file, tensor) {
  const descr = {float32: '<f4', int64: '<i8', int32: '<i4', bool: '|b1', uint8: '|u1'}[tensor.type];
  if (!descr) throw new Error(`output type ${tensor.type} is not handled`);
  const dims = tensor.dims.join(', ') + (tensor.dims.length === 1 ? ',' : '');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, inputDir, outputDir, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all',
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = readNpy(path.join(inputDir, `${name}.npy`));
  const first = await session.run(feeds);
  session.outputNames.forEach((name, k) => {
    writeNpy(path.join(outputDir, `output_${k}.npy`), first[name]);
  });
  process.stdout.write('ready\n');
  const lines = readline.createInterface({input: process.stdin});
  for await (const line of lines) {
    const [verb, count] = line.trim().split(/\s+/);
    if (verb !== 'run') break;
    const times = [];
    for (let i = 0; i < Number(count); ++i) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    process.stdout.write(times.join(' ') + '\n');
  }
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`ort_runner: ${e.message}\n`);
  process.exit(1);
});
