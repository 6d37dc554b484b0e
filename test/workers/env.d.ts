// Types of `env` and `exports` from "cloudflare:workers" inside tests.
import type { Env as DocketEnv } from "../../src/env";
import type * as Main from "../../src/index";

declare global {
  namespace Cloudflare {
    interface Env extends DocketEnv {
      TEST_MIGRATIONS: { name: string; queries: string[] }[];
      /** Low limits (vitest.config.ts) that test/workers/rate-limit.test.ts puts in place of the real ones. */
      RATE_LIMIT_TEST_ADDRESS: RateLimit;
      RATE_LIMIT_TEST_MEMBER: RateLimit;
      RATE_LIMIT_TEST_RUNNER: RateLimit;
    }
    interface GlobalProps {
      mainModule: typeof Main;
      durableNamespaces: "RunObject" | "SchedulerObject";
    }
  }
}
