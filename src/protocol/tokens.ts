// Organizations and their member and registration tokens (docs/protocol.md, "Organizations and
// tokens"; "Credentials").

import { z } from "zod";
import { epochMs, keysetCursor, orgId, page, pageQuery, tokenId } from "./common.js";

export const CreateOrgBody = z.object({ name: z.string().trim().min(1).max(100) }).strict();

export const CreateTokenBody = z
  .object({
    kind: z.enum(["member", "registration"]),
    role: z.enum(["admin", "member"]).optional(),
    name: z.string().trim().min(1).max(100).optional(),
    // The expiry (any token; a registration token's is at most REGISTRATION_TOKEN_TTL_MAX_MS), and how many registrations a registration token allows.
    expires_in_ms: z.number().int().min(1).optional(),
    max_uses: z.number().int().min(1).max(1_000_000).optional(),
  })
  .strict();
export type CreateTokenBody = z.infer<typeof CreateTokenBody>;

export const ListTokensQuery = z
  .object({
    kind: z.enum(["member", "registration"]).optional(),
    ...pageQuery(keysetCursor("tok_[0-9a-f]{24}")),
  })
  .strict();

export const TokenPath = z.object({ id: tokenId });

/** A token's new name (PATCH /v1/tokens/:id): the same bounds as a name given at creation. */
export const RenameTokenBody = z.object({ name: z.string().trim().min(1).max(100) }).strict();

/** A member or registration token as lists show it; the secret itself is shown once, at creation. */
export const Token = z.object({
  id: tokenId,
  kind: z.enum(["member", "registration", "machine"]),
  role: z.enum(["admin", "member"]).nullable(),
  name: z.string().nullable(),
  status: z.enum(["active", "revoked", "expired", "used_up"]),
  created_at_ms: epochMs,
  revoked_at_ms: epochMs.nullable(),
  expires_at_ms: epochMs.nullable(),
  /** Registration tokens only: how many registrations it allows and has had; null otherwise. */
  max_uses: z.number().int().nullable(),
  uses: z.number().int().nullable(),
}).meta({ id: "Token" });

/** A token just created: the listed fields and the secret, which is never shown again. */
export const CreatedToken = Token.extend({ token: z.string() }).meta({ id: "CreatedToken" });

export const TokenPage = page("tokens", Token);

export const Org = z.object({
  id: orgId,
  name: z.string(),
  created_at_ms: epochMs,
  /** The secret completion callbacks are signed with (docs/callbacks.md). */
  callback_secret: z.string(),
}).meta({ id: "Org" });

export const CreatedOrg = z.object({ org: Org, token: CreatedToken });

export const RotateCallbackSecretBody = z.object({}).strict();

export const RotatedCallbackSecret = z.object({
  callback_secret: z.string(),
  rotated_at_ms: epochMs,
  /** Until then, callbacks carry a signature with the previous secret too. */
  previous_secret_valid_until_ms: epochMs,
});
