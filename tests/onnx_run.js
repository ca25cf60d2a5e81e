// onnx_run.js — runs an ONNX model in ONNX Runtime (the onnxruntime-node package) on a raw
// float32 input and writes the raw float32 output: how test_onnx.sh checks `sfvit export`.
// Usage: NODE_PATH=<dir>/node_modules node onnx_run.js MODEL.onnx IN.f32 B,C,H,W OUT.f32
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, input, shapeText, output] = process.argv.slice(2);
  const shape = shapeText.split(',').map(Number);
  const raw = fs.readFileSync(input);
  const data = new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
  const session = await ort.InferenceSession.create(model, {graphOptimizationLevel: 'all', intraOpNumThreads: 1});
  const result = await session.run({images: new ort.Tensor('float32', data, shape)});
  const logits = result.logits;
  fs.writeFileSync(output, Buffer.from(logits.data.buffer, logits.data.byteOffset, logits.data.byteLength));
  console.log(`onnxruntime ${ort.env.versions ? ort.env.versions.common : ''}: logits [${logits.dims}]`);
}
main().catch((e) => { console.error(`onnx_run.js: ${e.message}`); process.exit(1); });
