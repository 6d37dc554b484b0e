// A GitHub App's private key as Web Crypto can import it. GitHub hands out PKCS#1 PEM
// ("BEGIN RSA PRIVATE KEY"); Web Crypto (workerd) imports only PKCS#8, and @octokit/auth-app
// refuses PKCS#1 there, so the key is wrapped in a PKCS#8 PrivateKeyInfo before use.

const PKCS1_LABEL = "RSA PRIVATE KEY";
const PKCS8_LABEL = "PRIVATE KEY";
// AlgorithmIdentifier { rsaEncryption (1.2.840.113549.1.1.1), NULL } and version 0, DER-encoded.
const RSA_ALGORITHM = [0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00];
const VERSION_0 = [0x02, 0x01, 0x00];

/** The key as PKCS#8 PEM; a PKCS#8 key comes back unchanged, anything else throws. */
export function toPkcs8Pem(privateKey: string): string {
  // A key pasted through an environment variable often carries "\n" escapes instead of newlines.
  const pem = privateKey.replace(/\\n/g, "\n").trim();
  const pkcs8 = readPem(pem, PKCS8_LABEL);
  if (pkcs8) return writePem(PKCS8_LABEL, pkcs8);
  const pkcs1 = readPem(pem, PKCS1_LABEL);
  if (!pkcs1) throw new Error("the GitHub App private key is not a PEM RSA private key (PKCS#1 or PKCS#8)");
  const octets = [0x04, ...derLength(pkcs1.length), ...pkcs1];
  const body = [...VERSION_0, ...RSA_ALGORITHM, ...octets];
  return writePem(PKCS8_LABEL, new Uint8Array([0x30, ...derLength(body.length), ...body]));
}

function readPem(pem: string, label: string): Uint8Array | null {
  const match = new RegExp(`-----BEGIN ${label}-----([\\s\\S]*?)-----END ${label}-----`).exec(pem);
  if (!match) return null;
  const binary = atob(match[1]!.replace(/\s+/g, ""));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function writePem(label: string, der: Uint8Array): string {
  let binary = "";
  for (const byte of der) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** A DER length: short form below 128, else 0x80|n followed by n big-endian bytes. */
function derLength(length: number): number[] {
  if (length < 0x80) return [length];
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return [0x80 | bytes.length, ...bytes];
}
