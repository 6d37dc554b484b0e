/** @jsxImportSource hono/jsx */
// The dashboard's sign-in and error pages.

import { Layout } from "./layout";
import { DASH } from "./session";

type Json = Record<string, any>;

export function SignInPage(props: { message?: string; error?: string }) {
  return (
    <Layout title="Sign in">
      <h1>Sign in</h1>
      <p>Sign in with a member token of your organization (it starts <code>dkt_m_</code>).</p>
      {props.message && <p role="status">{props.message}</p>}
      {props.error && <p class="error" role="alert">{props.error}</p>}
      <form method="post" action={`${DASH}/sign-in`}>
        <p>
          <label for="token">Member token</label>
          <br />
          <input id="token" name="token" type="password" autocomplete="off" required size={70} />
        </p>
        <button type="submit">Sign in</button>
      </form>
    </Layout>
  );
}

/** An API refusal, or a page that does not exist (404), inside the dashboard's own frame. */
export function ErrorPage(props: { status: number; error: Json; admin?: boolean }) {
  const notFound = props.status === 404;
  return (
    <Layout title={notFound ? "Not found" : `Error ${props.status}`} signedIn admin={props.admin}>
      <h1>{notFound ? "Not found" : `Error ${props.status}`}</h1>
      <p class="error" role="alert">
        {notFound ? props.error.message : <><code>{props.error.code}</code>: {props.error.message}</>}
      </p>
      <p>
        <a href={DASH}>Back to the queue</a>
      </p>
    </Layout>
  );
}
