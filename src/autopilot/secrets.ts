// Autopilot projects' secrets (the webhook secret, the GitHub App private key, the tracker's own
// API key: Linear's) at rest: AES-GCM
// (Web Crypto) under a key derived with HKDF from the deployment secret AUTOPILOT_SECRET_KEY. Each
// ciphertext is bound to its project and field (additional data), so a value copied to another
// row or column does not decrypt. Stored as "v1.<iv>.<ciphertext>", both base64.

import type { Env } from "../env";
import { DocketError } from "../errors";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const FORMAT = "v1";
/** Shorter deployment secrets are refused: the key is only as strong as its secret. */
export const SECRET_KEY_MIN_CHARS = 32;

export type SecretField = "webhook_secret" | "private_key" | "tracker_token";

const keys = new Map<string, Promise<CryptoKey>>();

function notConfigured(why: string): DocketError {
  return new DocketError("autopilot_not_configured", `autopilot secrets cannot be stored: ${why} (README, "Configuration")`, {
    setting: "AUTOPILOT_SECRET_KEY",
  });
}

/** The deployment's AUTOPILOT_SECRET_KEY, or a clear refusal when it is missing or too short. */
function deploymentSecret(env: Env): string {
  const secret = env.AUTOPILOT_SECRET_KEY;
  if (typeof secret !== "string" || secret === "") throw notConfigured("this deployment has no AUTOPILOT_SECRET_KEY");
  if (secret.length < SECRET_KEY_MIN_CHARS) throw notConfigured(`AUTOPILOT_SECRET_KEY is shorter than ${SECRET_KEY_MIN_CHARS} characters`);
  return secret;
}

/** Throws autopilot_not_configured unless secrets can be stored; checked before anything is written. */
export function requireSecretKey(env: Env): void {
  deploymentSecret(env);
}

function aesKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle
      .importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"])
      .then((base) =>
        crypto.subtle.deriveKey(
          { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: encoder.encode("docket autopilot project secrets v1") },
          base,
          { name: "AES-GCM", length: 256 },
          false,
          ["encrypt", "decrypt"],
        ),
      );
    keys.set(secret, key);
  }
  return key;
}

function additionalData(projectId: string, field: SecretField): Uint8Array {
  return encoder.encode(`${projectId}:${field}`);
}

function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

export async function encryptSecret(env: Env, projectId: string, field: SecretField, plaintext: string): Promise<string> {
  const key = await aesKey(deploymentSecret(env));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: additionalData(projectId, field) }, key, encoder.encode(plaintext));
  return `${FORMAT}.${toBase64(iv)}.${toBase64(new Uint8Array(sealed))}`;
}

/**
 * The secret in clear. A value that does not decrypt (AUTOPILOT_SECRET_KEY changed, or the row was
 * tampered with) is autopilot_not_configured, naming the field to set again.
 */
export async function decryptSecret(env: Env, projectId: string, field: SecretField, stored: string): Promise<string> {
  const key = await aesKey(deploymentSecret(env));
  const [format, iv, sealed] = stored.split(".");
  try {
    if (format !== FORMAT || !iv || !sealed) throw new Error("unknown format");
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: additionalData(projectId, field) }, key, fromBase64(sealed));
    return decoder.decode(plain);
  } catch {
    throw notConfigured(`the stored ${field} of ${projectId} does not decrypt under this AUTOPILOT_SECRET_KEY; set it again with PATCH`);
  }
}
