// Node's crypto under its bare name, for dependencies that import "crypto" rather than "node:crypto"
// (@linear/sdk's webhook client): wrangler.toml aliases "crypto" here, since wrangler's local build
// resolves only the node: form. nodejs_compat provides the module itself.
import crypto from "node:crypto";

export * from "node:crypto";
export default crypto;
