// Builds the console into dist/: one bundled, minified module (Preact and the app), the stylesheet,
// the page naming both by content hash (so a CDN may cache them for ever), and a config.json that
// names no API origin (the page's own, as under `dovecote dev`; a deployment writes its own).
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });

const result = await esbuild.build({
  entryPoints: [join(root, 'src', 'main.jsx')],
  bundle: true,
  format: 'esm',
  minify: true,
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  write: false,
  logLevel: 'warning',
});
const js = result.outputFiles[0].contents;
const css = await readFile(join(root, 'src', 'app.css'));
const named = (stem, ext, bytes) => `${stem}-${createHash('sha256').update(bytes).digest('hex').slice(0, 12)}.${ext}`;
const jsName = named('app', 'js', js);
const cssName = named('app', 'css', css);
await writeFile(join(dist, jsName), js);
await writeFile(join(dist, cssName), css);
const page = (await readFile(join(root, 'src', 'index.html'), 'utf8')).replace('@JS@', jsName).replace('@CSS@', cssName);
await writeFile(join(dist, 'index.html'), page);
await writeFile(join(dist, 'config.json'), JSON.stringify({ api: '' }) + '\n');
await copyFile(join(root, 'src', 'favicon.svg'), join(dist, 'favicon.svg'));
console.log(`console: built ${jsName} (${js.length} bytes), ${cssName} (${css.length} bytes) in ${dist}`);
