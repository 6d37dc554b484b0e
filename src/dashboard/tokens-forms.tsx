/** @jsxImportSource hono/jsx */
// The forms an admin mints tokens with (POST /dash/tokens, which calls POST /v1/tokens): a member
// token with its role, a registration token with its use limit, each with an optional expiry.

import { DASH } from "./session";

/** The units an expiry is typed in, as milliseconds (tokens-routes.tsx turns the form into expires_in_ms). */
export const EXPIRY_UNITS: Record<string, number> = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 };

function Expiry(props: { hint: string }) {
  return (
    <>
      <label>Expires in <input type="number" name="expires_in" min="1" step="1" placeholder={props.hint} /></label>{" "}
      <label>
        Unit{" "}
        <select name="expires_unit">
          {Object.keys(EXPIRY_UNITS).map((unit) => <option value={unit} selected={unit === "days"}>{unit}</option>)}
        </select>
      </label>
    </>
  );
}

/** A duration in the largest of EXPIRY_UNITS it is a whole number of. */
export function duration(ms: number): string {
  const [unit, size] = Object.entries(EXPIRY_UNITS).reverse().find(([, size]) => ms % size === 0) ?? ["ms", 1];
  return `${ms / size} ${unit}`;
}

/** `registrationTtlMs`: how long a registration token lasts when no expiry is typed (REGISTRATION_TOKEN_TTL_MS). */
export function MintForms(props: { registrationTtlMs: number }) {
  return (
    <section id="mint">
      <h2>Mint a token</h2>
      <p class="muted">
        Its secret is shown once, on the page that answers the form: copy it there. Without an expiry a member token never expires and a registration
        token expires after {duration(props.registrationTtlMs)}.
      </p>
      <form method="post" action={`${DASH}/tokens`} id="mint-member">
        <h3>Member token</h3>
        <input type="hidden" name="kind" value="member" />
        <label>Name <input type="text" name="name" maxlength={100} /></label>{" "}
        <label>
          Role{" "}
          <select name="role">
            <option value="member" selected>member</option>
            <option value="admin">admin</option>
          </select>
        </label>{" "}
        <Expiry hint="never" />{" "}
        <button type="submit">Mint member token</button>
      </form>
      <form method="post" action={`${DASH}/tokens`} id="mint-registration">
        <h3>Registration token (registers machines)</h3>
        <input type="hidden" name="kind" value="registration" />
        <label>Name <input type="text" name="name" maxlength={100} /></label>{" "}
        <Expiry hint="default" />{" "}
        <label>Max uses <input type="number" name="max_uses" min="1" max="1000000" step="1" placeholder="unlimited" /></label>{" "}
        <button type="submit">Mint registration token</button>
      </form>
    </section>
  );
}
