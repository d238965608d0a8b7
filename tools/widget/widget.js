// The live boxes: the reader's text -> word pieces and ids -> the embedding layer's rows, their sum, LayerNorm and
// the last layer's mean-pooled cosine, run by onnxruntime-web (wasm) on the exported checkpoint. Nothing is fetched
// until the reader presses "Load model"; every box on the page then shares the one model.
const boxes = document.querySelectorAll(".bfv-live[data-assets]");
let loading = null; // the one {session, tokenizer} promise of the page
let queue = Promise.resolve(); // one run at a time on the shared session, in the order asked

function formatBytes(bytes) {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

async function fetchWithProgress(url, total, onBytes) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onBytes(received, total);
  }
  const bytes = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

// The wasm runtime and the weights, counted together on every box's progress bar.
async function load(assets, sizes, maxPositions, onBytes) {
  const ort = await import(`${assets}ort.wasm.bundle.min.mjs`);
  const { Tokenizer } = await import(`${assets}tokenizers.min.mjs`);
  ort.env.wasm.wasmPaths = assets;
  ort.env.wasm.numThreads = 1; // no cross-origin isolation on a static host: one thread
  const wasmBytes = sizes["ort-wasm-simd-threaded.wasm"];
  const total = sizes["bert.onnx"] + wasmBytes + sizes["tokenizer.json"];
  const tokenizerJson = await (await fetch(`${assets}tokenizer.json`)).json();
  const wasm = await fetchWithProgress(`${assets}ort-wasm-simd-threaded.wasm`, total,
    (n) => onBytes(sizes["tokenizer.json"] + n, total));
  ort.env.wasm.wasmBinary = wasm;
  const model = await fetchWithProgress(`${assets}bert.onnx`, total,
    (n) => onBytes(sizes["tokenizer.json"] + wasmBytes + n, total));
  const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"] });
  session.maxPositions = maxPositions;
  const tokenizer = new Tokenizer(tokenizerJson, { do_lower_case: true });
  return { ort, session, tokenizer };
}

// A fixed shuffle (a seeded MINSTD generator), the same for every reader, [CLS] and [SEP] moved with the rest.
function shuffled(n) {
  const order = [...Array(n).keys()];
  let seed = 12345;
  for (let i = n - 1; i > 0; i--) {
    seed = (seed * 48271) % 2147483647; // MINSTD: every product stays below 2**53, exact in a double
    const j = seed % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

async function run(model, ids, types, mode) {
  const { ort, session } = model;
  const n = ids.length;
  const tensor = (values) => new ort.Tensor("int64", BigInt64Array.from(values, BigInt), [1, n]);
  const positions = mode === "shuffled" ? shuffled(n) : [...Array(n).keys()];
  const out = await session.run({
    input_ids: tensor(ids), token_type_ids: tensor(types), position_ids: tensor(positions),
    position_scale: new ort.Tensor("float32", Float32Array.of(mode === "removed" ? 0 : 1), [1]),
  });
  const hidden = out.hidden.dims[2];
  const row = (name, t) => out[name].data.subarray(t * hidden, (t + 1) * hidden);
  return { positions, hidden, row };
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

function meanPooled(result, n) {
  const pooled = new Float64Array(result.hidden);
  for (let t = 0; t < n; t++) result.row("hidden", t).forEach((x, k) => { pooled[k] += x / n; });
  return pooled;
}

function cosine(u, v) {
  let dot = 0;
  for (let k = 0; k < u.length; k++) dot += u[k] * v[k];
  return dot / (norm(u) * norm(v));
}

// One row of colour per token: blue below zero, orange above (a colour-blind safe pair), white at zero.
function strip(values) {
  const canvas = document.createElement("canvas");
  canvas.width = values.length;
  canvas.height = 1;
  canvas.setAttribute("aria-hidden", "true");
  const context = canvas.getContext("2d");
  const image = context.createImageData(values.length, 1);
  const scale = Math.max(...values.map(Math.abs)) || 1;
  values.forEach((x, k) => {
    const a = Math.min(1, Math.abs(x) / scale);
    const [r, g, b] = x < 0 ? [0, 114, 178] : [230, 159, 0];
    image.data.set([255 + (r - 255) * a, 255 + (g - 255) * a, 255 + (b - 255) * a, 255], 4 * k);
  });
  context.putImageData(image, 0, 0);
  return canvas;
}

const COLUMNS = [
  ["token", "word piece"], ["id", "id"], ["type", "segment"], ["pos", "position"],
  ["word", "‖word row‖"], ["segment", "‖segment row‖"], ["position", "‖position row‖"],
  ["summed", "‖sum‖"], ["normed", "‖LayerNorm‖"], ["strip", "LayerNorm output"],
];

function table(encoding, result) {
  const element = document.createElement("table");
  element.className = "bfv-table";
  const head = element.createTHead().insertRow();
  for (const [, label] of COLUMNS) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = label;
    head.append(th);
  }
  const body = element.createTBody();
  encoding.tokens.forEach((token, t) => {
    const tr = body.insertRow();
    tr.dataset.token = String(t);
    const cells = {
      token, id: encoding.ids[t], type: encoding.token_type_ids[t], pos: result.positions[t],
      word: norm(result.row("word", t)), segment: norm(result.row("segment", t)),
      position: norm(result.row("position", t)), summed: norm(result.row("summed", t)),
      normed: norm(result.row("normed", t)),
    };
    for (const [key] of COLUMNS) {
      const cell = key === "token" ? document.createElement("th") : tr.insertCell();
      if (key === "token") { cell.scope = "row"; tr.append(cell); }
      cell.dataset.key = key;
      if (key === "strip") cell.append(strip(Array.from(result.row("normed", t))));
      else cell.textContent = typeof cells[key] === "number" && !Number.isInteger(cells[key])
        ? cells[key].toFixed(3) : String(cells[key]);
    }
  });
  return element;
}

async function update(box, model) {
  const form = box.querySelector("form");
  const a = form.elements.a.value.trim();
  const b = form.elements.b.value.trim();
  const mode = form.elements.positions.value;
  const output = box.querySelector(".bfv-output");
  if (!a) {
    output.textContent = "Type a sentence in the first box.";
    return;
  }
  const started = performance.now();
  const encoding = model.tokenizer.encode(a, { text_pair: b || null, return_token_type_ids: true });
  const limit = model.session.maxPositions;
  if (encoding.ids.length > limit) {
    output.textContent = `${encoding.ids.length} tokens: the model has ${limit} positions. Shorten the text.`;
    return;
  }
  const result = await run(model, encoding.ids, encoding.token_type_ids, mode);
  const parts = [table(encoding, result)];
  const summary = document.createElement("p");
  if (b) {
    const one = (text) => model.tokenizer.encode(text, { return_token_type_ids: true });
    const [ea, eb] = [one(a), one(b)];
    const [ra, rb] = [await run(model, ea.ids, ea.token_type_ids, mode),
      await run(model, eb.ids, eb.token_type_ids, mode)];
    const value = cosine(meanPooled(ra, ea.ids.length), meanPooled(rb, eb.ids.length));
    summary.innerHTML = `Cosine of the two sentences, each run alone, mean of the last layer's vectors `
      + `(as sentence-transformers pools this checkpoint): <strong class="bfv-cosine">${value.toFixed(3)}</strong>.`;
  } else {
    summary.textContent = "Type a second sentence to see the pair's segments and the two sentences' cosine.";
  }
  const ms = performance.now() - started;
  const note = document.createElement("p");
  note.className = "bfv-note";
  note.textContent = `${encoding.ids.length} tokens, positions ${mode}; ran in ${ms.toFixed(0)} ms in this browser.`;
  output.replaceChildren(summary, ...parts, note);
  output.dataset.ms = ms.toFixed(1);
  output.dataset.firstMs ??= ms.toFixed(1);
  output.dataset.runs = String(Number(output.dataset.runs || 0) + 1);
}

function setUp(box) {
  const assets = new URL(box.dataset.assets, document.baseURI).href; // import() needs an absolute URL
  const sizes = JSON.parse(box.dataset.sizes);
  const button = box.querySelector(".bfv-load");
  const progress = box.querySelector("progress");
  const status = box.querySelector(".bfv-status");
  const form = box.querySelector("form");
  box.querySelector(".bfv-controls").hidden = false;
  box.querySelector(".bfv-nojs").hidden = true;
  let timer = null;
  const output = box.querySelector(".bfv-output");
  let pending = 0;
  const refresh = () => {
    output.dataset.pending = String(++pending);
    queue = queue.then(() => loading).then((model) => update(box, model)).catch((error) => {
      status.textContent = `The model could not run: ${error.message}`;
    }).finally(() => {
      if (--pending === 0) delete output.dataset.pending;
      else output.dataset.pending = String(pending);
    });
  };
  button.addEventListener("click", () => {
    progress.hidden = false;
    button.disabled = true;
    const onBytes = (received, total) => {
      for (const other of boxes) {
        const bar = other.querySelector("progress");
        bar.hidden = false;
        bar.max = total;
        bar.value = received;
        other.querySelector(".bfv-status").textContent =
          `${formatBytes(received)} of ${formatBytes(total)}`;
      }
    };
    loading ??= load(assets, sizes, Number(box.dataset.maxPositions), onBytes);
    loading.then(() => {
      for (const other of boxes) {
        other.querySelector(".bfv-status").textContent = "Model loaded: edit the sentences, results follow.";
        other.querySelector(".bfv-load").disabled = true;
        other.querySelector("fieldset.bfv-inputs").disabled = false;
        other.querySelector(".bfv-output").dataset.loadedAt = String(performance.now());
        other.querySelector("form").requestSubmit(); // every box shows its sentences at once
      }
    }, (error) => {
      status.textContent = `The model could not load: ${error.message}`;
      button.disabled = false;
      loading = null;
    });
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer); // the typing that led here needs no run of its own
    refresh();
  });
  form.addEventListener("input", () => {
    if (!loading) return;
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  });
}

boxes.forEach(setUp);
