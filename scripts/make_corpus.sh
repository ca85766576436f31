#!/usr/bin/env bash
# Builds the plain-text perplexity corpus: $POCKETLLM_MODELS/corpus/python-docs.txt (models/corpus/
# without the variable).
#
# Source: Debian's Python documentation package (python3.11-doc, pulled in by python3-doc): the
# HTML of the Python tutorial, then the library introduction, built-in functions and built-in types
# chapters, in a fixed order. Each page's main body is converted to plain text with Python's
# html.parser (navigation, sidebars, scripts, styles and the pilcrow anchors are dropped; paragraphs
# and code blocks keep their line breaks). The output is deterministic for a given package version
# (about 465 KB, ~121K SmolLM2 tokens) and is rebuilt only when missing (--force rebuilds it).
source "$(dirname "$0")/common.sh"

CORPUS_DEB_PACKAGES=(python3.11-doc)
CORPUS_DIR="$MODELS_DIR/corpus"
CORPUS="$CORPUS_DIR/python-docs.txt"
HTML_DIR=/usr/share/doc/python3.11/html

force=0
[ "${1:-}" = "--force" ] && force=1
if [ -s "$CORPUS" ] && [ $force -eq 0 ]; then
  log "corpus exists: $CORPUS"
  exit 0
fi

missing=()
for p in "${CORPUS_DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "missing packages: ${missing[*]}"
    log "install them with: sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
fi

mkdir -p "$CORPUS_DIR"
python3 - "$HTML_DIR" "$CORPUS.part" <<'PY'
import html.parser, re, sys
from pathlib import Path

html_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
PAGES = [
    "tutorial/appetite", "tutorial/interpreter", "tutorial/introduction", "tutorial/controlflow",
    "tutorial/datastructures", "tutorial/modules", "tutorial/inputoutput", "tutorial/errors",
    "tutorial/classes", "tutorial/stdlib", "tutorial/stdlib2", "tutorial/venv", "tutorial/whatnow",
    "tutorial/interactive", "tutorial/floatingpoint", "tutorial/appendix",
    "library/intro", "library/functions", "library/stdtypes",
]
BLOCK = {"p", "div", "section", "pre", "li", "dt", "dd", "tr", "br", "table", "ul", "ol", "dl",
         "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
SKIP = {"script", "style", "nav", "head", "footer"}


class Text(html.parser.HTMLParser):
    """Collects the text inside <div role="main"> (Sphinx's page body)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0       # open <div>s inside the main body (0 = outside)
        self.skip = 0        # inside a tag whose text is dropped
        self.pre = 0
        self.parts = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.depth == 0:
            if tag == "div" and a.get("role") == "main":
                self.depth = 1
            return
        if tag == "div":
            self.depth += 1
        if tag in SKIP:
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if tag in BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if self.depth == 0:
            return
        if tag in SKIP:
            self.skip = max(0, self.skip - 1)
        if tag == "pre":
            self.pre -= 1
        if tag in BLOCK:
            self.parts.append("\n")
        if tag == "div":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth == 0 or self.skip:
            return
        data = data.replace("\u00b6", "")  # the pilcrow of Sphinx's header links
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))

    def text(self):
        lines = [l.rstrip() for l in "".join(self.parts).split("\n")]
        s = "\n".join(l if l.strip() else "" for l in lines)
        return re.sub(r"\n{3,}", "\n\n", s).strip() + "\n"


chunks = []
for page in PAGES:
    p = Text()
    p.feed((html_dir / (page + ".html")).read_text(encoding="utf-8"))
    chunks.append(p.text())
out.write_text("\n".join(chunks), encoding="utf-8")
PY
mv "$CORPUS.part" "$CORPUS"
log "corpus: $CORPUS ($(wc -c <"$CORPUS") bytes)"
