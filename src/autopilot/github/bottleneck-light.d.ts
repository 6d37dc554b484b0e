// bottleneck's light build (no Redis clustering), the one @octokit/plugin-throttling runs on: the
// same API as the package's typed main entry.
declare module "bottleneck/light.js" {
  import Bottleneck from "bottleneck";
  export default Bottleneck;
}
