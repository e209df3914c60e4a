// fault-server.mjs - serves the files of a directory with Range requests
// the way a misbehaving server or network would, for test-pull.sh:
//   node fault-server.mjs DIR PORT_FILE
// The first path segment picks the behaviour; the rest names the file.
//   /ok/F        206 answers, as a plain server gives them
//   /drop/F      every 3rd range: half of it, then the connection is cut
//   /short/F     every 3rd range: Content-Length says the whole range,
//                fewer bytes come, then the connection closes
//   /busy/F      every other request: 429 or 503 with Retry-After: 1
//   /stall/F     the 4th range: headers, then nothing (the client must give up)
//   /gone/F      every range after the first: 416
//   /changing/F  after 6 requests the ETag changes (the file was replaced)
//   /nope/F      always 503 with Retry-After: 0
//   /hfres/F     302 to /store/F?sig=S, a new S each time: a signed
//                storage URL; /store/ serves 4 ranges for each S, then
//                answers 403 (it expired)
// Each behaviour counts its own requests. GET /count/B answers how many
// requests behaviour B has had.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const [dir, portFile] = process.argv.slice(2);
const counts = {};
let nextSig = 1;
const served = {};

function parseRange(h, size) {
  const m = /^bytes=(\d+)-(\d*)$/.exec(h || "");
  if (!m) return null;
  const a = +m[1], b = m[2] === "" ? size - 1 : Math.min(+m[2], size - 1);
  return a <= b && a < size ? [a, b] : "bad";
}

const server = http.createServer((req, res) => {
  const parts = req.url.split("?")[0].split("/").filter(Boolean);
  const mode = parts[0];
  if (mode === "count") {
    res.end(String(counts[parts[1]] || 0));
    return;
  }
  const n = (counts[mode] = (counts[mode] || 0) + 1);
  if (mode === "hfres") {
    res.writeHead(302, { Location: `/store/${parts.slice(1).join("/")}?sig=${nextSig++}` }).end();
    return;
  }
  if (mode === "store") {
    const sig = new URL(req.url, "http://x").searchParams.get("sig") || "none";
    served[sig] = (served[sig] || 0) + 1;
    if (served[sig] > 4) {
      res.writeHead(403).end("expired");
      return;
    }
  }
  const file = path.join(dir, path.basename(parts.slice(1).join("/") || "x"));
  let st;
  try {
    st = fs.statSync(file);
  } catch {
    res.writeHead(404).end("not found");
    return;
  }
  const size = st.size;
  const etag = mode === "changing" && n > 6 ? `"v2-${size}"` : `"v1-${size}"`;
  if (mode === "nope" || (mode === "busy" && n % 2 === 0)) {
    res.writeHead(n % 4 === 0 ? 429 : 503, { "Retry-After": mode === "nope" ? "0" : "1" }).end("busy");
    return;
  }
  const r = parseRange(req.headers.range, size);
  if (r === "bad" || (mode === "gone" && n > 1)) {
    res.writeHead(416, { "Content-Range": `bytes */${size}` }).end();
    return;
  }
  if (!r) {
    res.writeHead(200, { "Content-Length": size, ETag: etag });
    fs.createReadStream(file).pipe(res);
    return;
  }
  const [a, b] = r;
  const len = b - a + 1;
  const headers = { "Content-Range": `bytes ${a}-${b}/${size}`, "Content-Length": len, ETag: etag };
  res.writeHead(206, headers);
  if (mode === "stall" && n === 4) return; // never answers
  const cut = (mode === "drop" || mode === "short") && n % 3 === 0 && len > 1;
  const send = cut ? Math.floor(len / 2) : len;
  const s = fs.createReadStream(file, { start: a, end: a + send - 1 });
  s.pipe(res, { end: !cut });
  if (cut)
    s.on("end", () => {
      if (mode === "drop") req.socket.destroy();
      else res.socket.end(); // the promised length never comes
    });
});
server.keepAliveTimeout = 1000;
server.listen(0, "127.0.0.1", () => fs.writeFileSync(portFile, String(server.address().port)));
