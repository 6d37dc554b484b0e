// Text files imported whole with Vite's `?raw` suffix (test/workers/doc-shapes.test.ts reads docs/protocol.md).
declare module "*.md?raw" {
  const text: string;
  export default text;
}
