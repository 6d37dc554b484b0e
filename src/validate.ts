// Validation at the edge of every route: handlers receive typed data, and bad input is a 400
// invalid_request naming the field, never a 500 (../shared/DESIGN.md, "Protocol essentials").

import { zValidator } from "@hono/zod-validator";
import type { ValidationTargets } from "hono";
import { z } from "zod";
import { DocketError } from "./errors";

export function fieldOf(issue: z.core.$ZodIssue | undefined): string {
  if (!issue || issue.path.length === 0) return "body";
  return issue.path.map(String).join(".");
}

export function invalid(error: z.ZodError, where: string): DocketError {
  const issue = error.issues[0];
  const field = fieldOf(issue);
  return new DocketError("invalid_request", `${where} ${field}: ${issue?.message ?? "is invalid"}`, { field });
}

/** zValidator whose failures throw invalid_request instead of answering in its own format. */
export function validate<T extends z.ZodType, Target extends keyof ValidationTargets>(target: Target, schema: T) {
  return zValidator(target, schema, (result) => {
    if (!result.success) throw invalid(result.error as unknown as z.ZodError, target === "json" ? "body" : target);
  });
}

/** Reusable field schemas. */
export const runIdParam = z.string().regex(/^run_[0-9a-f]{24}$/, "must be a run id like run_<24 hex digits>");
export const attemptParam = z.coerce.number().int().min(1).max(1_000_000);
export const cliVersion = z.string().min(1).max(64);
export const protocolList = z.array(z.string().min(1).max(32)).min(1).max(16);
export const labelList = z.array(z.string().min(1).max(64).regex(/^[A-Za-z0-9_.:\/-]+$/, "labels are letters, digits and _ . : / -")).max(32);
