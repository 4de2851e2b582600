// Test-only Noise initiator (the harness side) for remote-mode experiments.
//
// An independent JavaScript model of the hybrid IK handshake as docs/REMOTE.md §3
// describes it, built on the npm oracle packages (@noble/post-quantum ML-KEM-768,
// @noble/curves X25519) and node:crypto (SHA-256, HMAC, AES-256-GCM). It exists so a
// Python test can play a harness against an executor (the reference or ours) through
// tests/remote/fake_cloud.py; the WebSocket stays in Python.
//
// Protocol on stdin/stdout: one JSON object per line each way, bytes as standard base64.
//   {"op":"keygen"}                                   -> {"public_key": {suite, x25519_public_key, mlkem768_public_key}}
//   {"op":"msg1","prologue":b64,"rs":{...key JSON},"payload":b64}  -> {"msg":b64}
//   {"op":"msg2","msg":b64}                           -> {"payload":b64}   (then transport mode)
//   {"op":"encrypt","plaintext":b64}                  -> {"ciphertext":b64}
//   {"op":"decrypt","ciphertext":b64}                 -> {"plaintext":b64}
// Errors: {"error": "..."}.
import { createHash, createHmac, createCipheriv, createDecipheriv } from 'node:crypto';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// ESM ignores NODE_PATH: import the oracle packages by absolute path
// (ORACLE_NODE_MODULES = the directory printed by tests/oracle/install.sh).
const oracle = process.env.ORACLE_NODE_MODULES;
if (!oracle) throw new Error('set ORACLE_NODE_MODULES (see tests/oracle/install.sh)');
const load = (p) => import(pathToFileURL(join(oracle, p)).href);
const { ml_kem768 } = await load('@noble/post-quantum/ml-kem.js');
const { x25519 } = await load('@noble/curves/ed25519.js');

const SUITE = 'Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256';
const NOISE_NAME = 'Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256';
const b64 = (u8) => Buffer.from(u8).toString('base64');
const unb64 = (s) => new Uint8Array(Buffer.from(s, 'base64'));
const cat = (...a) => Buffer.concat(a.map((x) => Buffer.from(x)));
const sha256 = (d) => createHash('sha256').update(d).digest();
const hmac = (k, d) => createHmac('sha256', k).update(d).digest();

function hkdf(ck, ikm, n) {
  const tmp = hmac(ck, ikm);
  const out = [];
  let prev = Buffer.alloc(0);
  for (let i = 1; i <= n; i++) {
    prev = hmac(tmp, cat(prev, [i]));
    out.push(prev);
  }
  return out;
}

function nonce(n) {
  const b = Buffer.alloc(12);
  b.writeBigUInt64BE(BigInt(n), 4);
  return b;
}

function aeadEncrypt(k, n, ad, pt) {
  const c = createCipheriv('aes-256-gcm', k, nonce(n));
  c.setAAD(ad);
  return cat(c.update(pt), c.final(), c.getAuthTag());
}

function aeadDecrypt(k, n, ad, ct) {
  if (ct.length < 16) throw new Error('ciphertext shorter than the tag');
  const d = createDecipheriv('aes-256-gcm', k, nonce(n));
  d.setAAD(ad);
  d.setAuthTag(ct.subarray(ct.length - 16));
  return cat(d.update(ct.subarray(0, ct.length - 16)), d.final());
}

class Symmetric {
  constructor() {
    const name = Buffer.from(NOISE_NAME);
    this.h = name.length <= 32 ? cat(name, Buffer.alloc(32 - name.length)) : sha256(name);
    this.ck = this.h;
    this.k = null;
    this.n = 0;
  }
  mixHash(d) { this.h = sha256(cat(this.h, d)); }
  mixKey(ikm) { const [ck, k] = hkdf(this.ck, ikm, 2); this.ck = ck; this.k = k; this.n = 0; }
  mixKeyAndHash(ikm) {
    const [ck, th, k] = hkdf(this.ck, ikm, 3);
    this.ck = ck; this.mixHash(th); this.k = k; this.n = 0;
  }
  encryptAndHash(p) {
    const c = this.k ? aeadEncrypt(this.k, this.n++, this.h, p) : Buffer.from(p);
    this.mixHash(c);
    return c;
  }
  decryptAndHash(c) {
    const p = this.k ? aeadDecrypt(this.k, this.n++, this.h, c) : Buffer.from(c);
    this.mixHash(c);
    return p;
  }
  split() { return hkdf(this.ck, Buffer.alloc(0), 2); }
}

const state = { s: null, e: null, sym: null, send: null, recv: null };

function keygen() {
  const xs = x25519.utils.randomSecretKey();
  const kem = ml_kem768.keygen();
  state.s = { xs, xp: x25519.getPublicKey(xs), ks: kem.secretKey, kp: kem.publicKey };
  return { public_key: { suite: SUITE, x25519_public_key: b64(state.s.xp),
                         mlkem768_public_key: b64(state.s.kp) } };
}

function msg1(req) {
  const rx = unb64(req.rs.x25519_public_key);
  const rk = unb64(req.rs.mlkem768_public_key);
  const sym = new Symmetric();
  sym.mixHash(unb64(req.prologue));
  sym.mixHash(rx); // pre-message <- s
  sym.mixHash(rk);
  const out = [];
  // skem: encapsulate to the responder's static ML-KEM key (no key yet: ct in clear)
  const sk = ml_kem768.encapsulate(rk);
  out.push(sym.encryptAndHash(sk.cipherText));
  sym.mixKeyAndHash(sk.sharedSecret);
  // e: X25519 then ML-KEM ephemeral public keys, in clear
  const exs = x25519.utils.randomSecretKey();
  const ekem = ml_kem768.keygen();
  state.e = { xs: exs, xp: x25519.getPublicKey(exs), ks: ekem.secretKey, kp: ekem.publicKey };
  out.push(state.e.xp); sym.mixHash(state.e.xp);
  out.push(state.e.kp); sym.mixHash(state.e.kp);
  sym.mixKey(x25519.getSharedSecret(state.e.xs, rx)); // es
  out.push(sym.encryptAndHash(state.s.xp)); // s
  out.push(sym.encryptAndHash(state.s.kp));
  sym.mixKey(x25519.getSharedSecret(state.s.xs, rx)); // ss
  out.push(sym.encryptAndHash(unb64(req.payload)));
  state.sym = sym;
  return { msg: b64(cat(...out)) };
}

// Message 2. Clatter's noise_hybrid_ik() responder pattern is `<- ekem, skem, e, ee, se`
// (NOT `e, ee, se, ekem, skem` as the first reading of the source had; the total, 3424 bytes, is the same):
//   ekem: ct (1088) in clear, MixHash(ct), MixKey(Decaps(ct, our ephemeral ML-KEM key))
//   skem: DecryptAndHash(1088+16) -> ct, MixKeyAndHash(Decaps(ct, our static ML-KEM key))
//   e:    responder X25519 (32) and ML-KEM (1184) ephemeral keys in clear, MixHash each
//   ee, se: MixKey(DH(e, re)), MixKey(DH(s, re)); then the (empty) payload, 16-byte tag.
function msg2(req) {
  const m = Buffer.from(unb64(req.msg));
  const sym = state.sym;
  let off = 0;
  const take = (n) => { if (off + n > m.length) throw new Error('msg2 too short'); const r = m.subarray(off, off + n); off += n; return r; };
  const ect = take(1088);
  sym.mixHash(ect);
  sym.mixKey(ml_kem768.decapsulate(ect, state.e.ks));
  const sct = sym.decryptAndHash(take(1088 + 16));
  sym.mixKeyAndHash(ml_kem768.decapsulate(sct, state.s.ks));
  const rex = take(32); sym.mixHash(rex);
  const rek = take(1184); sym.mixHash(rek);
  sym.mixKey(x25519.getSharedSecret(state.e.xs, rex)); // ee
  sym.mixKey(x25519.getSharedSecret(state.s.xs, rex)); // se
  const payload = sym.decryptAndHash(m.subarray(off));
  const [k1, k2] = sym.split();
  state.send = { k: k1, n: 0 };
  state.recv = { k: k2, n: 0 };
  return { payload: b64(payload) };
}

const ops = {
  keygen,
  msg1,
  msg2,
  encrypt: (r) => ({ ciphertext: b64(aeadEncrypt(state.send.k, state.send.n++, Buffer.alloc(0), unb64(r.plaintext))) }),
  decrypt: (r) => ({ plaintext: b64(aeadDecrypt(state.recv.k, state.recv.n++, Buffer.alloc(0), Buffer.from(unb64(r.ciphertext)))) }),
};

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let out;
  try {
    const req = JSON.parse(line);
    out = ops[req.op](req);
  } catch (e) {
    out = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
});
