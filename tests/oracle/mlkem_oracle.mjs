// The JavaScript side of tests/blackbox/test_mlkem_oracle.py: @noble/post-quantum's
// ML-KEM-768 behind the same stdin/stdout line protocol as tests/oracle/mlkem768_cli.c
// (see there), so the test can drive both implementations alike.
// Usage: node mlkem_oracle.mjs <node_modules path printed by install.sh>
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const nm = process.argv[2];
const { ml_kem768 } = await import(pathToFileURL(join(nm, '@noble/post-quantum/ml-kem.js')).href);

const unhex = (s, n) => {
  if (typeof s !== 'string' || s.length !== 2 * n || !/^[0-9a-f]*$/.test(s)) throw new Error('parse');
  return Uint8Array.from(Buffer.from(s, 'hex'));
};
const hex = (b) => Buffer.from(b).toString('hex');

function serve(line) {
  const [cmd, a, b] = line.trim().split(/\s+/);
  if (cmd === 'keygen') {
    const seed = a === undefined ? undefined : new Uint8Array([...unhex(a, 32), ...unhex(b, 32)]);
    const { publicKey, secretKey } = ml_kem768.keygen(seed);
    return `ok ${hex(publicKey)} ${hex(secretKey)}`;
  }
  if (cmd === 'encaps') {
    const { cipherText, sharedSecret } = ml_kem768.encapsulate(unhex(a, 1184), b === undefined ? undefined : unhex(b, 32));
    return `ok ${hex(cipherText)} ${hex(sharedSecret)}`;
  }
  if (cmd === 'decaps') return `ok ${hex(ml_kem768.decapsulate(unhex(a, 1088), unhex(b, 2400)))}`;
  throw new Error('parse');
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let out;
  try {
    out = serve(line);
  } catch (e) {
    out = `err ${e.message.includes('parse') ? 'parse' : 'invalid'}`;
  }
  process.stdout.write(out + '\n');
}
