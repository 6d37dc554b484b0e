// A GitHub App's key for the Workers tests: a fresh RSA key pair made with Web Crypto, its private
// half as GitHub hands it out (a PKCS#1 PEM), so the provider signs real installation-token JWTs.

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** A fresh RSA key pair, its private half as a PKCS#1 PEM (the PKCS#8 wrapper's inner key). */
export async function appKeyPair(): Promise<{ pkcs1Pem: string; publicKey: CryptoKey }> {
  const pair = (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
  // PrivateKeyInfo: SEQUENCE(len) INTEGER 0, AlgorithmIdentifier (15 bytes), OCTET STRING(len) <PKCS#1>.
  let at = 1 + lengthSize(pkcs8, 1) + 3 + 15;
  at += 1 + lengthSize(pkcs8, at + 1);
  const pkcs1 = pkcs8.slice(at);
  const lines = base64(pkcs1).match(/.{1,64}/g)!.join("\n");
  return { pkcs1Pem: `-----BEGIN RSA PRIVATE KEY-----\n${lines}\n-----END RSA PRIVATE KEY-----\n`, publicKey: pair.publicKey };
}
const lengthSize = (der: Uint8Array, at: number) => (der[at]! < 0x80 ? 1 : 1 + (der[at]! & 0x7f));
