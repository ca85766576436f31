"""Llama 3's tokenizer: `pocketllm tokenize` gives exactly the ids of OpenAI's tiktoken.

The reference is built as llama-models' llama3/tokenizer.py builds it: a tiktoken.Encoding from
the wheel's rank file (llama3/tokenizer.model), the wheel's own pre-tokenizer regex (pat_str, read
from its source) and the 256 special tokens after the ranked ones. Our side is the GGUF vocabulary
bench/llama3_vocab.py writes from the same rank file (model "gpt2", pre "llama-bpe", merges rebuilt
from the ranks), so the test covers both the converter and the engine's BPE and pre-tokenizer.

The wheel comes from PyPI (pip download, never installed) into bench/.cache/ the first time; where
that fails the tests skip. The text (~56 KB, ~26,000 tokens, generated below, deterministic) mixes
prose, Python and C++ code, CJK, emoji sequences, numbers, contractions, punctuation and whitespace
runs, several scripts, odd-but-valid code points and long runs, and a seeded shuffle of all of them,
so that unusual neighbours (digits against emoji, punctuation before letters, marks after spaces)
meet.

Checked: the whole text in one call (no BOS: tokenize adds none without --add-special); every
line alone (one call: the lines are joined by a special token that both sides split on); the
decode round trip through the library's detokenizer (the Python package, where it is installed).
"""
from __future__ import annotations

import importlib.util
import random
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

import pllm_cli

_spec = importlib.util.spec_from_file_location("llama3_vocab", pllm_cli.REPO / "bench" / "llama3_vocab.py")
llama3_vocab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llama3_vocab)

# Joins the lines for the per-line check; never part of the text itself.
SENTINEL = "<|reserved_special_token_240|>"

# ---- the text --------------------------------------------------------------------------------

PROSE = """\
The quick brown fox jumps over the lazy dog. It's a well-known pangram; you'll find it in
typefaces' specimen sheets, and typists've used it for more than a century. "Why?" she asked --
"because it's short, and it uses every letter!" I'd say that's reason enough, wouldn't you?
Dr. Smith's lab (room 4B) reported a 12.5% increase -- twice last year's figure -- in Q3 2023.
  Indented paragraphs, double  spaces after periods.  And lines that end with spaces...   
Meanwhile, on the 3rd of March, 1.21 gigawatts were needed; we'd been told it couldn't be done.
"""

CONTRACTION_WORDS = ["it", "don", "we", "they", "I", "you", "SHE", "He", "cat", "x", "1", "", " "]
CONTRACTION_SUFFIXES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE",
                        "'vE", "'M", "'LL", "'lL", "'Ll", "'D", "'x", "'", "''s", "'s's", "\u2019s",
                        "'\u017f", "'\u017ft", "'\u212a"]

NUMBERS_FIXED = """\
0 7 42 100 999 1000 1024 65535 4294967296 18446744073709551615 123456789012345678901
3.14159265358979 2.718 0.5 .5 5. -42 +17 1e10 1E-9 6.02e23 0x7fff 0b1011 0o755 1_000_000
1,234 12,345,678 1,234,567.89 1.234.567,89 1 000 000 1'000'000 $1,299.99 EUR 5,-- 50% 3/4
2024-05-17 12:34:56.789 +1 (555) 010-9999 v1.2.3 192.168.0.1 ::1 10^9 2^64 x86_64 mp3 4K 1080p
\uff11\uff12\uff13\uff14\uff15 \u0663\u0664\u0665\u0666 \u0967\u0968\u0969\u096a \u00b2\u00b3\u00b9 \u00bd\u00be \u216b \u2460\u2461
abc123def 12abc abc12 a1b2c3d4 1st 2nd 3rd 4th 11th 100km 5kg 3.5GHz 1990s '90s
"""

CODE_PY = '''\
import os
from typing import Dict, List


class Cache:
    """A tiny LRU cache.   """

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._data: Dict[str, List[int]] = {}
        \t# a tab after spaces
\t\tself.hits = 0  # tabs only

    def get(self, key):
        if key in self._data:
            self.hits += 1
            return self._data[key]
        return None
    \n\n
    @property
    def ratio(self) -> float:
        return self.hits / max(1, len(self._data))  # avoid /0


def main(argv=None):
    c = Cache(capacity=0x10)
    for i in range(1_000):
        c._data[f"k{i:04d}"] = [i, i ** 2, i // 3, i % 7]
    print(f"{c.ratio:.3f}", sep="\\t", end="\\n")
    return 0 if c.hits >= 0 else -1


if __name__ == "__main__":
    raise SystemExit(main())
'''

CODE_CPP = """\
#include <algorithm>
#include <vector>

namespace pllm {

template <typename T, size_t N = 16>
struct Ring {
\tstd::array<T, N> buf{};
\tsize_t head = 0, tail = 0;

\tbool push(const T& v) noexcept {
\t\tif ((tail + 1) % N == head) return false;  // full
\t\tbuf[tail] = v;
\t\ttail = (tail + 1) % N;
\t\treturn true;
\t}
};

/* A block comment
 * with stars.
 */
int main(int argc, char** argv) {
    std::vector<int> xs{3, 1, 4, 1, 5, 9, 2, 6};
    std::sort(xs.begin(), xs.end(), [](int a, int b) { return a > b; });
    for (auto it = xs.cbegin(); it != xs.cend(); ++it) printf("%d\\n", *it);
    auto* p = &xs[0]; p->~int(); x <<= 2; y >>= 3; z ^= ~0u; if (a && !b || c) {}
    return argc > 1 ? std::atoi(argv[1]) : 0;
}\r
}  // namespace pllm\r
"""

CJK = """\
\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\uff0c\u5929\u6c14\u975e\u5e38\u597d\u3002\u673a\u5668\u5b66\u4e60\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u5206\u652f\u3002\u300c\u4f60\u597d\uff0c\u4e16\u754c\uff01\u300d
\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3067\u3059\u3002\u3072\u3089\u304c\u306a\u3001\u30ab\u30bf\u30ab\u30ca\u3001\u6f22\u5b57\u304c\u6df7\u3056\u3063\u3066\u3044\u307e\u3059\u3002\u6771\u4eac\u30bf\u30ef\u30fc\u306f\uff13\uff13\uff13\u30e1\u30fc\u30c8\u30eb\u3067\u3059\u3002\uff08\u6ce8\uff09
\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4. \uc548\ub155\ud558\uc138\uc694, \ubc18\uac11\uc2b5\ub2c8\ub2e4! \uc11c\uc6b8\uc740 \ub300\ud55c\ubbfc\uad6d\uc758 \uc218\ub3c4\uc785\ub2c8\ub2e4.
\u4e2d\u6587English\u6df7\u5408mixed\u6587\u672c123\u4e2a\u5b57\u7b26\u3000\u5168\u89d2\u7a7a\u683c\u3001\u6807\u70b9\uff1a\u201c\u5f15\u53f7\u201d\u2014\u2014\u7834\u6298\u53f7\u2026\u2026
"""

EMOJI = """\
\U0001f600 \U0001f44d \U0001f44d\U0001f3fb \U0001f44d\U0001f3fd \U0001f44d\U0001f3ff \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f469\U0001f3fd\u200d\U0001f4bb \U0001f3f3\ufe0f\u200d\U0001f308 \U0001f3f4\u200d\u2620\ufe0f
\u2764\ufe0f \u2764\ufe0f\u200d\U0001f525 \U0001f1eb\U0001f1f7\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8 1\ufe0f\u20e3 #\ufe0f\u20e3 \U0001f9d1\U0001f3ff\u200d\U0001f91d\u200d\U0001f9d1\U0001f3fb \U0001f602\U0001f602\U0001f602 ok\U0001f44cok 42\U0001f4af \u263a \u2603\ufe0e
Let's go!\U0001f680\U0001f680 done\u2705. \u00a9 \u00ae \u2122 \u2190\u2192\u21d2 \u2200x\u2208\u211d: x\u00b2\u22650 \u221e \u2248 \u2260 \u00b1 \u00d7 \u00f7
"""

PUNCT = """\
!!! ??? ... !?!? ?!.. --- === *** ___ ~~~ ``` ''' \"\"\" ### $$$ %%% &&& ||| \\\\ //
"quoted" 'single' \u201ccurly\u201d \u2018curly\u2019 \u00abguillemets\u00bb \u201elow\u201c \u2014 \u2013 \u2026 \u00b7 \u2022 \u00a7 \u00b6
(([[{{}}]])) <<>> <=> -> => != == <= >= += -= :: ;; ,, .. @user #tag $var %d ^_^ :-) ;-) </div>
End.\n\nNew paragraph!\n\n\nThree newlines?!\r\nCRLF.\rCR only.\n.\n,\n;\n
-\ta\t-\tb : c ;d ,e .f !g ?h
"""

SPACES = (
    "a  b   c    d     e      f\n"
    "  two leading\n"
    "    four leading\n"
    "trailing   \n"
    "tab\tsep\t\tdouble\t \tmixed \t\n"
    " \n  \n   \n\n\n\n"
    "nbsp\u00a0here \u00a0 and\u202fnarrow\u2009thin\u2003em\u3000ideographic\n"
    "zero\u200bwidth\u200cnon\u200djoiner \ufeffbom\u2060wj\n"
    "line\u2028separator\u2029paragraph\u0085nel\x0bvt\x0cff\n"
    "unit\x1fsep\x1erecord\x1dgroup\x1cfile\x7fdel\x01soh\x00nul\n"
    "x \n \ny\r\n\r\n \r\n\t\r\n"
    "ogham\u1680space mongolian\u180evs mmsp\u205f\u205fx \u2000\u2001\u2002\u2004\u2005\u2006\u2007\u2008\u200a|\n"
)

# Long runs: the pre-tokenizer's repeats (\s+, \p{L}+, \p{N}{1,3}, punctuation+) over hundreds of characters.
LONG = ("x" + " " * 37 + "y" + "\n" * 25 + "\t" * 9 + "z" + " \t" * 10 + "\n"
        + "=" * 120 + "\n" + "-" * 64 + ">" + "\n" + "9" * 500 + "\n" + "\u4e00\u4e8c\u4e09" * 200 + "\n"
        + "".join(random.Random(7).choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(3000))
        + "\n" + "\U0001f600" * 100 + "\n" + " " * 200 + "\n")

SCRIPTS = """\
na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00c5ngstr\u00f6m Stra\u00dfe \u0152UVRE Dvo\u0159\u00e1k \u0141\u00f3d\u017a \u011f\u00fc\u015f\u0131\u00f6\u00e7 \u0130stanbul S\u00e3o Paulo a\u00f1o \u00deorn \u00e6\u00f8\u00e5
cafe\u0301 n\u0303 A\u030a e\u0308\u0301 \u1e9b\u0323 \ufb01 \ufb02 \u01c4 \u01c5 \u01c6 \u02b0 \u02c6
\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0442\u0435\u043a\u0441\u0442 \u043d\u0430 \u0440\u0443\u0441\u0441\u043a\u043e\u043c \u044f\u0437\u044b\u043a\u0435. \u0401\u043b\u043a\u0430 \u0438 \u0451\u0436. \u0423\u043a\u0440\u0430\u0457\u043d\u0441\u044c\u043a\u0430: \u0491\u0456\u0454\u0457.
\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5! \u03a9\u03bc\u03ad\u03b3\u03b1 \u03b1\u03b2\u03b3 \u0394\u03b4 \u03c3\u03c2\u03a3
\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0627\u0644\u0639\u0631\u0628\u064a\u0629\u061f \u0661\u0662\u0663 \u200f\u200e
\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd \u05e2\u05d5\u05dc\u05dd\u05f3 \u05e2\u05b4\u05d1\u05b0\u05e8\u05b4\u05d9\u05ea
\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964 \u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u0932\u093f\u0916\u093e \u0917\u092f\u093e \u0935\u093e\u0915\u094d\u092f\u0965 \u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e
\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 \u0986\u09ae\u09bf \u09ac\u09be\u0982\u09b2\u09be \u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8 \u0540\u0561\u0575\u0565\u0580\u0565\u0576
"""

EDGE = (
    "\ufffd replacement \ue000\uf8ff private use \U000f0000 \U0010fffd plane 16 \ufffe\uffff noncharacters\n"
    "\U0001d400\U0001d401\U0001d402 \U0001d538\U0001d539 math letters \U0001d7ce\U0001d7cf math digits \U00010348 gothic\n"
    "\u0300 lone combining at start, \u20dd enclosing, \u00ad soft hyphen, \u034f cgj, \ufe0f vs16 alone\n"
    "\u0000\u0001\u0002\u001b[31mANSI\u001b[0m \u007f\u0080\u0081\u009f C1 controls \u00a0\n"
    "\u2f00\u31c0\U00020000\U0002a6d6 rare CJK \u3400 ext A \uac00\ud7a3 hangul ends \u1100\u1161\u11a8 jamo\n"
    "<|begin_of_text|> literal special text <|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "</s> <s> [INST] <unk> <pad> <|endoftext|> <|im_start|>\n"
)

SECTIONS = [PROSE, NUMBERS_FIXED, CODE_PY, CODE_CPP, CJK, EMOJI, PUNCT, SPACES, SCRIPTS, EDGE, LONG]

SEPARATORS = [" ", " ", " ", "", "  ", "   ", "\n", "\n\n", "\t", " \t", "\n ", ", ", ". ", ".\n", "!\n\n", " \n",
              "\r\n", "'", "\u00a0", "\u3000", "-", "_", "/", "\U0001f600"]


def mixed_text(min_bytes: int = 50_000) -> str:
    rng = random.Random(20240517)
    parts = list(SECTIONS)
    # Contractions in every case against several words, numbers of every length 1-20 digits
    # (plain, signed, decimal, with thousands separators).
    parts.append(" ".join(w + s for w in CONTRACTION_WORDS for s in CONTRACTION_SUFFIXES) + "\n")
    nums = []
    for n in range(1, 21):
        digits = "".join(rng.choice("0123456789") for _ in range(n))
        grouped = f"{int(digits):,}"
        nums += [digits, "-" + digits, digits + "." + digits[::-1], grouped, grouped.replace(",", "."),
                 "x" + digits + "y", digits + "%", "(" + digits + ")"]
    parts.append(" ".join(nums) + "\n")
    # A seeded shuffle of pieces of everything above, joined by assorted separators.
    pool = [w for sec in parts for w in sec.replace("\n", " \n ").split(" ") if w]
    pool += ["".join(rng.sample(sec, min(len(sec), 12))) for sec in SECTIONS for _ in range(30)]
    out = "".join(parts)
    line: list[str] = []
    while len(out.encode("utf-8")) < min_bytes:
        for _ in range(400):
            line.append(rng.choice(pool))
            line.append(rng.choice(SEPARATORS))
        out += "".join(line) + "\n"
        line.clear()
    return out


# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def llama3(tmp_path_factory):
    """The vocab GGUF and the reference tiktoken.Encoding."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken not installed (tests/py/requirements.txt lists it)")
    pytest.importorskip("gguf")
    try:
        pattern = llama3_vocab.tiktoken_pattern()
        ranks = llama3_vocab.load_ranks()
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"could not get the llama-models wheel from PyPI into {llama3_vocab.CACHE} "
                    f"(Llama 3's tokenizer.model and tokenizer.py): {e}")
    specials = {tok: len(ranks) + i for i, tok in enumerate(llama3_vocab.special_tokens())}
    enc = tiktoken.Encoding(name="llama3", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    gguf_path = tmp_path_factory.mktemp("llama3-vocab") / "llama3-vocab.gguf"
    llama3_vocab.build(str(gguf_path))
    return SimpleNamespace(gguf=gguf_path, enc=enc, specials=specials)


@pytest.fixture(scope="module")
def text() -> str:
    t = mixed_text()
    # llama-models' Tokenizer.encode cuts texts over 400,000 characters and runs of over 25,000
    # (non-)whitespace characters before tiktoken sees them; this text needs neither, so encoding it
    # with the Encoding directly is what llama-models does.
    assert len(t) < 400_000 and max(map(len, t.split())) < 25_000
    assert SENTINEL not in t
    return t


# ---- helpers ---------------------------------------------------------------------------------


def our_ids(pllm_bin, gguf, data: str, path: Path, *extra) -> list[int]:
    path.write_bytes(data.encode("utf-8"))
    proc = pllm_cli.check_ok(pllm_cli.run_cli(pllm_bin, ["tokenize", "-m", gguf, "-f", path, *extra]))
    return pllm_cli.parse_ids(proc.stdout)


def pieces(enc, ids) -> list:
    return [enc.decode_single_token_bytes(i) if i < enc.n_vocab else i for i in ids]


def first_difference(enc, want: list[int], got: list[int]) -> str:
    i = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    lo = max(0, i - 8)
    return (f"first difference at token {i} of {len(want)} (ours: {len(got)} tokens)\n"
            f"  text before: {b''.join(pieces(enc, want[lo:i]))!r}\n"
            f"  tiktoken: {want[i:i + 12]} = {pieces(enc, want[i:i + 12])}\n"
            f"  ours:     {got[i:i + 12]} = {pieces(enc, got[i:i + 12])}")


# ---- tests -----------------------------------------------------------------------------------


def test_text_covers_the_mix(text):
    """The text is as large and as mixed as the docstring says."""
    assert len(text.encode("utf-8")) >= 50_000
    for needle in ["'ll", "'RE", "\t\t", "    ", "\r\n", "\u4e2d", "\u3072", "\ud55c", "\u200d", "\U0001f3fd",
                   "18446744073709551615", "1,234,567.89", "\u041f", "\u0645", "\u0928", "\u00e9", "   \n"]:
        assert needle in text, needle


def test_whole_text_matches_tiktoken(pllm_bin, llama3, text, work_dir):
    want = llama3.enc.encode(text, disallowed_special=())
    got = our_ids(pllm_bin, llama3.gguf, text, work_dir / "text.txt")
    assert got == want, first_difference(llama3.enc, want, got)
    # Special-token text stays text unless asked for; with --parse-special it becomes the ids.
    assert llama3.specials["<|begin_of_text|>"] not in got
    assert len(want) > 15_000


def test_each_line_matches_tiktoken(pllm_bin, llama3, text, work_dir):
    """Every line (with its newline) tokenized alone: one call, the lines joined by a special token,
    which both tokenizers split on before the pre-tokenizer runs (specials parsed on both sides)."""
    lines = text.splitlines(keepends=True)
    assert "".join(lines) == text and len(lines) > 100
    # splitlines also cuts at \r, \x0b, \x0c, \x1c-\x1e, \x85, \u2028, \u2029: more, shorter lines.
    sentinel = llama3.specials[SENTINEL]
    got_all = our_ids(pllm_bin, llama3.gguf, SENTINEL.join(lines), work_dir / "lines.txt", "--parse-special")
    got_lines: list[list[int]] = [[]]
    for i in got_all:
        if i == sentinel:
            got_lines.append([])
        else:
            got_lines[-1].append(i)
    assert len(got_lines) == len(lines), f"{len(got_lines)} pieces for {len(lines)} lines"
    for n, (line, got) in enumerate(zip(lines, got_lines), 1):
        want = llama3.enc.encode(line, allowed_special="all")
        assert got == want, (f"line {n} of {len(lines)}: {line!r}\n  tiktoken: {want}\n  ours:     {got}\n"
                             + first_difference(llama3.enc, want, got))


def test_decode_round_trip(pllm_bin, llama3, text):
    """Our detokenizer (pllm_detokenize through the Python package: the CLI has no detokenize) turns
    the ids back into the text, byte for byte."""
    pocketllm = pytest.importorskip("pocketllm", reason="the pocketllm Python package is not installed "
                                    "(pip install ./python); the CLI has no detokenize")
    ids = llama3.enc.encode(text, disallowed_special=())
    assert llama3.enc.decode(ids) == text
    with pocketllm.Model(str(llama3.gguf), vocab_only=True) as m:
        assert m.detokenize(ids) == text
        lines = text.splitlines(keepends=True)
        for n, line in enumerate(lines, 1):
            ids = llama3.enc.encode(line, disallowed_special=())
            assert m.detokenize(ids) == line, f"line {n}: {line!r}"
