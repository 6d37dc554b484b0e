// Types of `env` and `exports` from "cloudflare:workers" inside tests.
import type { Env as DocketEnv } from "../../src/env";
import type * as Main from "../../src/index";

declare global {
  namespace Cloudflare {
    interface Env extends DocketEnv {
      TEST_MIGRATIONS: { name: string; queries: string[] }[];
    }
    interface GlobalProps {
      mainModule: typeof Main;
      durableNamespaces: "RunObject" | "SchedulerObject";
    }
  }
}
