// Independent JavaScript model of the remote-mode Noise channel (test-time only).
//
// Clatter hybrid IK, "Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256", written from the
// Noise specification and Clatter's token semantics on top of the @noble packages
// (x25519, AES-GCM, SHA-256, RFC 5869 HKDF, ML-KEM-768) rather than from our C code:
// a generic token interpreter over the pattern table, so a mistake in the C engine's
// hand-unrolled messages shows up as a byte difference here.
//
//   node noise_ik_oracle.mjs NODE_MODULES header            -> C vector header on stdout
//   node noise_ik_oracle.mjs NODE_MODULES peer initiator|responder
//        line protocol on stdin/stdout for the live cross-handshake test (see
//        tests/blackbox/test_noise_ik_oracle.py); fresh random keys.
//   node noise_ik_oracle.mjs NODE_MODULES clatter-vector FILE
//        replays a vector that Rust Clatter 2.2.0 generated for hybridXX
//        (25519+MLKEM768, ChaChaPoly, SHA256, DummyRng from 0xdeadbeef; the format
//        of go-clatter's testdata/vectors/hybrid_xx_x25519_mlkem768_chacha_sha256.txt)
//        through this model's token interpreter: evidence that the model's token
//        semantics and responder token order are Clatter's, not just our reading.
//
// NODE_MODULES is the directory printed by tests/oracle/install.sh (ESM ignores
// NODE_PATH, so the packages are imported by absolute path).
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';

const [nm, mode, role] = process.argv.slice(2);
if (!nm || !mode) {
  console.error('usage: noise_ik_oracle.mjs NODE_MODULES header|peer [initiator|responder]');
  process.exit(2);
}
const load = (p) => import(pathToFileURL(`${nm}/${p}`).href);
const { x25519 } = await load('@noble/curves/ed25519.js');
const { gcm } = await load('@noble/ciphers/aes.js');
const { chacha20poly1305 } = await load('@noble/ciphers/chacha.js');
const { sha256 } = await load('@noble/hashes/sha2.js');
const { hkdf } = await load('@noble/hashes/hkdf.js');
const { ml_kem768 } = await load('@noble/post-quantum/ml-kem.js');

const enc = new TextEncoder();
const PROTOCOL_NAME = 'Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256';
const SUITE = 'Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256';
const PROLOGUE_LABEL = 'codex-exec-server-relay-noise/v1';
const MAX_MESSAGE = 65535;
// Clatter noise_hybrid_ik(): pre-message `<- s`, then one message per side.
const HYBRID_IK = {
  preResponder: ['s'],
  messages: [
    ['skem', 'e', 'es', 's', 'ss'], // initiator
    ['ekem', 'skem', 'e', 'ee', 'se'], // responder
  ],
};
// Clatter noise_hybrid_xx(), only for replaying Clatter's own vectors.
const HYBRID_XX = {
  preResponder: [],
  messages: [['e'], ['ekem', 'e', 'ee', 's', 'es'], ['skem', 's', 'se'], ['skem']],
};

const cat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
};
const hex = (b) => Buffer.from(b).toString('hex');
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'));
const b64 = (b) => Buffer.from(b).toString('base64');

// Deterministic randomness shared with the C unit test: the stream for a label is
// SHA-256(label || be32(0)) || SHA-256(label || be32(1)) || ..., consumed in order.
function streamRng(label) {
  let counter = 0, buf = new Uint8Array(0);
  return (n) => {
    while (buf.length < n) {
      const c = new Uint8Array(4);
      new DataView(c.buffer).setUint32(0, counter++);
      buf = cat(buf, sha256(cat(enc.encode(label), c)));
    }
    const out = buf.slice(0, n);
    buf = buf.slice(n);
    return out;
  };
}
const systemRng = (n) => new Uint8Array(randomBytes(n));

// Static identity: X25519 private (32), then ML-KEM seed d || z (64).
function staticKey(rng) {
  const xpriv = rng(32);
  const kem = ml_kem768.keygen(rng(64));
  return { xpriv, xpub: x25519.getPublicKey(xpriv), kemPub: kem.publicKey, kemSec: kem.secretKey };
}
const publicJson = (k) => JSON.stringify({
  suite: SUITE, x25519_public_key: b64(k.xpub), mlkem768_public_key: b64(k.kemPub),
});
function parsePublicJson(text) {
  const o = JSON.parse(text);
  const keys = Object.keys(o).sort().join(',');
  if (keys !== 'mlkem768_public_key,suite,x25519_public_key' || o.suite !== SUITE)
    throw new Error('bad public key json');
  const xpub = new Uint8Array(Buffer.from(o.x25519_public_key, 'base64'));
  const kemPub = new Uint8Array(Buffer.from(o.mlkem768_public_key, 'base64'));
  if (xpub.length !== 32 || kemPub.length !== 1184) throw new Error('bad key lengths');
  return { xpub, kemPub };
}

function prologue(env, reg, stream) {
  const part = (s) => {
    const b = enc.encode(s), len = new Uint8Array(8);
    new DataView(len.buffer).setBigUint64(0, BigInt(b.length));
    return cat(len, b);
  };
  return cat(part(PROLOGUE_LABEL), part(env), part(reg), part(stream));
}

// Noise nonces: AESGCM puts the counter big-endian after 4 zero bytes, ChaChaPoly
// little-endian.
const AESGCM = (k, n, ad) => {
  const iv = new Uint8Array(12);
  new DataView(iv.buffer).setBigUint64(4, BigInt(n));
  return gcm(k, iv, ad);
};
const CHACHAPOLY = (k, n, ad) => {
  const iv = new Uint8Array(12);
  new DataView(iv.buffer).setBigUint64(4, BigInt(n), true);
  return chacha20poly1305(k, iv, ad);
};
const OUR_SUITE = { name: PROTOCOL_NAME, pattern: HYBRID_IK, aead: AESGCM };

class CipherState {
  constructor(k, aead) { this.k = k; this.n = 0; this.aead = aead; }
  encrypt(ad, pt) { const c = this.aead(this.k, this.n, ad).encrypt(pt); this.n++; return c; }
  decrypt(ad, ct) {
    const p = this.aead(this.k, this.n, ad).decrypt(ct); // throws on a bad tag
    this.n++;
    return p;
  }
}

class Handshake {
  // s: our static; rs: the responder's public key (initiator only).
  constructor(initiator, s, rs, prologueBytes, rng, suite = OUR_SUITE) {
    this.initiator = initiator; this.s = s; this.rng = rng; this.suite = suite;
    this.rs = rs ?? null; this.re = null; this.e = null; this.msgIndex = 0;
    // Both names are longer than HASHLEN, so Noise hashes them rather than padding.
    if (suite.name.length <= 32) throw new Error('short protocol names are not modelled');
    this.h = sha256(enc.encode(suite.name));
    this.ck = this.h.slice();
    this.cs = null;
    this.mixHash(prologueBytes);
    const rpub = initiator ? rs : s;
    for (const t of suite.pattern.preResponder) {
      if (t !== 's') throw new Error('unsupported pre-message');
      this.mixHash(rpub.xpub);
      this.mixHash(rpub.kemPub);
    }
  }
  mixHash(d) { this.h = sha256(cat(this.h, d)); }
  mixKey(ikm) {
    const o = hkdf(sha256, ikm, this.ck, new Uint8Array(0), 64);
    this.ck = o.slice(0, 32); this.cs = new CipherState(o.slice(32, 64), this.suite.aead);
  }
  mixKeyAndHash(ikm) {
    const o = hkdf(sha256, ikm, this.ck, new Uint8Array(0), 96);
    this.ck = o.slice(0, 32); this.mixHash(o.slice(32, 64));
    this.cs = new CipherState(o.slice(64, 96), this.suite.aead);
  }
  encryptAndHash(pt) {
    const c = this.cs ? this.cs.encrypt(this.h, pt) : pt.slice();
    this.mixHash(c);
    return c;
  }
  decryptAndHash(c) {
    const p = this.cs ? this.cs.decrypt(this.h, c) : c.slice();
    this.mixHash(c);
    return p;
  }
  dh(token) {
    const [mine, theirs] = {
      ee: [this.e?.xpriv, this.re?.xpub],
      es: this.initiator ? [this.e?.xpriv, this.rs?.xpub] : [this.s.xpriv, this.re?.xpub],
      se: this.initiator ? [this.s.xpriv, this.re?.xpub] : [this.e?.xpriv, this.rs?.xpub],
      ss: [this.s.xpriv, this.rs?.xpub],
    }[token];
    return x25519.getSharedSecret(mine, theirs);
  }
  tokens() {
    const t = this.suite.pattern.messages[this.msgIndex];
    if (!t) throw new Error('handshake already finished');
    return t;
  }
  write(payload) {
    const out = [];
    const myTurn = (this.msgIndex % 2 === 0) === this.initiator;
    if (!myTurn) throw new Error('not our turn');
    for (const t of this.tokens()) {
      if (t === 'e') {
        this.e = staticKey(this.rng); // same shape as a static pair: x25519 then d||z
        out.push(this.e.xpub, this.e.kemPub);
        this.mixHash(this.e.xpub); this.mixHash(this.e.kemPub);
      } else if (t === 's') {
        out.push(this.encryptAndHash(this.s.xpub), this.encryptAndHash(this.s.kemPub));
      } else if (t === 'ekem') {
        const { cipherText, sharedSecret } = ml_kem768.encapsulate(this.re.kemPub, this.rng(32));
        out.push(cipherText); this.mixHash(cipherText); this.mixKey(sharedSecret);
      } else if (t === 'skem') {
        const { cipherText, sharedSecret } = ml_kem768.encapsulate(this.rs.kemPub, this.rng(32));
        out.push(this.encryptAndHash(cipherText)); this.mixKeyAndHash(sharedSecret);
      } else {
        this.mixKey(this.dh(t));
      }
    }
    out.push(this.encryptAndHash(payload));
    this.msgIndex++;
    const msg = cat(...out);
    if (msg.length > MAX_MESSAGE) throw new Error('message too large');
    return msg;
  }
  read(msg) {
    let off = 0;
    const take = (n) => {
      if (off + n > msg.length) throw new Error('short message');
      const b = msg.slice(off, off + n); off += n; return b;
    };
    const tag = () => (this.cs ? 16 : 0);
    for (const t of this.tokens()) {
      if (t === 'e') {
        this.re = { xpub: take(32), kemPub: take(1184) };
        this.mixHash(this.re.xpub); this.mixHash(this.re.kemPub);
      } else if (t === 's') {
        const xpub = this.decryptAndHash(take(32 + tag()));
        const kemPub = this.decryptAndHash(take(1184 + tag()));
        this.rs = { xpub, kemPub };
      } else if (t === 'ekem') {
        const ct = take(1088);
        this.mixHash(ct); this.mixKey(ml_kem768.decapsulate(ct, this.e.kemSec));
      } else if (t === 'skem') {
        const ct = this.decryptAndHash(take(1088 + tag()));
        this.mixKeyAndHash(ml_kem768.decapsulate(ct, this.s.kemSec));
      } else {
        this.mixKey(this.dh(t));
      }
    }
    const payload = this.decryptAndHash(msg.slice(off));
    this.msgIndex++;
    return payload;
  }
  split() {
    const o = hkdf(sha256, new Uint8Array(0), this.ck, new Uint8Array(0), 64);
    const i2r = new CipherState(o.slice(0, 32), this.suite.aead);
    const r2i = new CipherState(o.slice(32, 64), this.suite.aead);
    return this.initiator ? { send: i2r, recv: r2i } : { send: r2i, recv: i2r };
  }
}

// ---- vector header --------------------------------------------------------------

function cArray(name, bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16)
    lines.push('    ' + Array.from(bytes.slice(i, i + 16), (b) => `0x${b.toString(16).padStart(2, '0')},`).join(' '));
  return `static const uint8_t ${name}[${bytes.length}] = {\n${lines.join('\n')}\n};\n`;
}
// Only JSON text with base64 goes here: escaping the quote is all C needs.
const cString = (name, s) => `static const char ${name}[] =\n${s.match(/.{1,64}/g)
  .map((l) => `    "${l.replaceAll('"', '\\"')}"`).join('\n')};\n`;

function header() {
  const iStatic = staticKey(streamRng('noise-ik initiator static'));
  const rStatic = staticKey(streamRng('noise-ik responder static'));
  const pro = prologue('env-1', 'registration-1', 'stream-1');
  const payload = enc.encode('harness-key-authorization:vector-0001');
  const ini = new Handshake(true, iStatic, { xpub: rStatic.xpub, kemPub: rStatic.kemPub }, pro,
    streamRng('noise-ik initiator handshake'));
  const res = new Handshake(false, rStatic, null, pro, streamRng('noise-ik responder handshake'));
  const msg1 = ini.write(payload);
  const got = res.read(msg1);
  if (hex(got) !== hex(payload) || hex(res.rs.xpub) !== hex(iStatic.xpub)) throw new Error('self-check 1');
  const msg2 = res.write(new Uint8Array(0));
  if (ini.read(msg2).length !== 0 || hex(ini.h) !== hex(res.h)) throw new Error('self-check 2');
  const ti = ini.split(), tr = res.split();
  const i2r = [enc.encode('hello from the harness'), new Uint8Array(0)];
  const big = new Uint8Array(1000).map((_, i) => (i * 7 + 3) & 0xff);
  const r2i = [enc.encode('hello from the executor'), big];
  const recI2r = i2r.map((p) => ti.send.encrypt(new Uint8Array(0), p));
  const recR2i = r2i.map((p) => tr.send.encrypt(new Uint8Array(0), p));
  recI2r.forEach((c, k) => { if (hex(tr.recv.decrypt(new Uint8Array(0), c)) !== hex(i2r[k])) throw new Error('self-check 3'); });
  recR2i.forEach((c, k) => { if (hex(ti.recv.decrypt(new Uint8Array(0), c)) !== hex(r2i[k])) throw new Error('self-check 4'); });

  let out = `/* Generated by tests/oracle/gen_noise_ik_vectors.sh from the independent JavaScript
 * model tests/oracle/noise_ik_oracle.mjs (@noble x25519, AES-GCM, SHA-256/HKDF,
 * ML-KEM-768). Do not edit. Randomness: the SHA-256 counter stream of each label
 * (see test_noise_ik.c); prologue ("env-1", "registration-1", "stream-1"). */
#ifndef NOISE_IK_VECTORS_H
#define NOISE_IK_VECTORS_H

#include <stdint.h>

#define NV_LABEL_INITIATOR_STATIC "noise-ik initiator static"
#define NV_LABEL_RESPONDER_STATIC "noise-ik responder static"
#define NV_LABEL_INITIATOR_HANDSHAKE "noise-ik initiator handshake"
#define NV_LABEL_RESPONDER_HANDSHAKE "noise-ik responder handshake"
#define NV_PAYLOAD "${new TextDecoder().decode(payload)}"
#define NV_I2R_0 "${new TextDecoder().decode(i2r[0])}"
#define NV_R2I_0 "${new TextDecoder().decode(r2i[0])}"
/* NV_R2I_1 is 1000 bytes, byte i = (7 i + 3) mod 256; NV_I2R_1 is empty. */

`;
  out += cArray('nv_initiator_x25519_pub', iStatic.xpub);
  out += cArray('nv_initiator_mlkem_pub', iStatic.kemPub);
  out += cString('nv_responder_public_json', publicJson(rStatic));
  out += cArray('nv_msg1', msg1);
  out += cArray('nv_msg2', msg2);
  out += cArray('nv_handshake_hash', ini.h);
  out += cArray('nv_i2r_0', recI2r[0]);
  out += cArray('nv_i2r_1', recI2r[1]);
  out += cArray('nv_r2i_0', recR2i[0]);
  out += cArray('nv_r2i_1', recR2i[1]);
  out += '\n#endif\n';
  process.stdout.write(out);
}

// ---- live peer ------------------------------------------------------------------
//
// Lines in, lines out, hex for bytes:
//   responder: prints "PUB <json>"; reads "MSG1 <hex>" and prints "REMOTE <json>",
//              "PAYLOAD <hex>", "MSG2 <hex>".
//   initiator: reads "PEER <json>" and prints "PUB <json>", "MSG1 <hex>"; reads
//              "MSG2 <hex>" and prints "OK".
//   both, after the handshake: "SEND <hex>" -> "REC <hex>"; "REC <hex>" -> "PT <hex>"
//   (or "ERR <text>" when it does not decrypt). Prologue from env NOISE_ENV/_REG/_STREAM.
// The payload the initiator sends is env NOISE_PAYLOAD.

async function peer(isInitiator) {
  const say = (s) => process.stdout.write(s + '\n');
  const pro = prologue(process.env.NOISE_ENV ?? 'env-1', process.env.NOISE_REG ?? 'registration-1',
    process.env.NOISE_STREAM ?? 'stream-1');
  const me = staticKey(systemRng);
  let hs = null, t = null;
  if (!isInitiator) {
    hs = new Handshake(false, me, null, pro, systemRng);
    say(`PUB ${publicJson(me)}`);
  }
  for await (const line of createInterface({ input: process.stdin })) {
    const sp = line.indexOf(' ');
    const cmd = sp < 0 ? line : line.slice(0, sp), arg = sp < 0 ? '' : line.slice(sp + 1);
    try {
      if (cmd === 'PEER' && isInitiator) {
        hs = new Handshake(true, me, parsePublicJson(arg), pro, systemRng);
        say(`PUB ${publicJson(me)}`);
        say(`MSG1 ${hex(hs.write(enc.encode(process.env.NOISE_PAYLOAD ?? '')))}`);
      } else if (cmd === 'MSG1' && !isInitiator) {
        const payload = hs.read(unhex(arg));
        say(`REMOTE ${publicJson({ xpub: hs.rs.xpub, kemPub: hs.rs.kemPub })}`);
        say(`PAYLOAD ${hex(payload)}`);
        say(`MSG2 ${hex(hs.write(new Uint8Array(0)))}`);
        t = hs.split();
      } else if (cmd === 'MSG2' && isInitiator) {
        if (hs.read(unhex(arg)).length !== 0) throw new Error('non-empty msg-2 payload');
        t = hs.split();
        say('OK');
      } else if (cmd === 'SEND' && t) {
        say(`REC ${hex(t.send.encrypt(new Uint8Array(0), unhex(arg)))}`);
      } else if (cmd === 'REC' && t) {
        say(`PT ${hex(t.recv.decrypt(new Uint8Array(0), unhex(arg)))}`);
      } else {
        say(`ERR unexpected ${cmd}`);
      }
    } catch (e) {
      say(`ERR ${e.message}`);
    }
  }
}

// ---- Clatter's own vector ---------------------------------------------------------

async function clatterVector(path) {
  const { readFileSync } = await import('node:fs');
  const text = readFileSync(path, 'utf8');
  const field = (re) => (text.match(re) ?? [])[1];
  if (field(/^pattern: (\S+)/m) !== 'hybridXX' || field(/^cipher: (\S+)/m) !== 'ChaChaPoly' ||
      field(/^hash: (\S+)/m) !== 'SHA256' || field(/^kem: (\S+)/m) !== 'MlKem768')
    throw new Error('only the hybridXX 25519+MLKEM768 ChaChaPoly SHA256 vector is modelled');
  const msgs = [...text.matchAll(/^msg\[(\d+)\] (initiator|responder): ([0-9a-f]+)$/gm)].map((m) => unhex(m[3]));
  const hashes = [...text.matchAll(/^h\[(\d+)\]: ([0-9a-f]+)$/gm)].map((m) => m[2]);
  const transports = [...text.matchAll(/^transport\[(\d+)\] (initiator|responder): ([0-9a-f]+)$/gm)]
    .map((m) => ({ sender: m[2], data: m[3] }));
  // Clatter's DummyRng: one counter shared by both sides, byte = counter++ mod 256.
  let counter = 0xdeadbeefn;
  const dummy = (n) => Uint8Array.from({ length: n }, () => Number(counter++ % 256n));
  // The generator draws alice DH, bob DH, alice KEM, bob KEM, then the handshake's own.
  const a = { xpriv: dummy(32) }, b = { xpriv: dummy(32) };
  for (const k of [a, b]) k.xpub = x25519.getPublicKey(k.xpriv);
  for (const k of [a, b]) { const kp = ml_kem768.keygen(dummy(64)); k.kemPub = kp.publicKey; k.kemSec = kp.secretKey; }
  const suite = { name: 'Noise_hybridXX_25519+MLKEM768_ChaChaPoly_SHA256', pattern: HYBRID_XX, aead: CHACHAPOLY };
  const pro = unhex(field(/^prologue_hex: ([0-9a-f]*)/m));
  const ini = new Handshake(true, a, null, pro, dummy, suite);
  const res = new Handshake(false, b, null, pro, dummy, suite);
  msgs.forEach((want, i) => {
    const [w, r] = i % 2 === 0 ? [ini, res] : [res, ini];
    const got = w.write(new Uint8Array(0));
    if (hex(got) !== hex(want)) throw new Error(`msg[${i}] differs from Clatter's`);
    r.read(got);
    if (hashes[i] && hex(w.h) !== hashes[i]) throw new Error(`h[${i}] differs from Clatter's`);
  });
  const ti = ini.split(), tr = res.split();
  const payloads = ['Scream without a sound', 'Flying off the handle', 'Eugene gene the dance machine'];
  transports.forEach((t, i) => {
    const [s, r] = t.sender === 'initiator' ? [ti, tr] : [tr, ti];
    const c = s.send.encrypt(new Uint8Array(0), enc.encode(payloads[i]));
    if (hex(c) !== t.data) throw new Error(`transport[${i}] differs from Clatter's`);
    r.recv.decrypt(new Uint8Array(0), c);
  });
  console.log(`clatter-vector: ${msgs.length} handshake messages, ${hashes.length} hashes and ` +
    `${transports.length} transport records match Clatter byte for byte`);
}

if (mode === 'header') header();
else if (mode === 'clatter-vector') await clatterVector(role);
else if (mode === 'peer') await peer(role === 'initiator');
else { console.error(`unknown mode ${mode}`); process.exit(2); }
