#!/usr/bin/env python3
"""Check that the documentation's links and named paths hold.

Usage: docs_links.py ROOT        check ROOT's README.md, python/README.md and
                                 docs/**/*.md
       docs_links.py --self-test check the checker on documents made up in
                                 a temporary folder

Rules:
- Links. Every inline link or image [text](target) and reference
  definition [label]: target outside code, whose target has no URL scheme
  (http:, https:, mailto: ... are not checked), must name an existing file
  or folder, relative to the document (a leading / means the repository
  root). A #anchor, alone or after a path to a .md file, must be the slug
  of a heading of that document (or an <a id=...>/<a name=...> in it).
  Slugs follow GitHub: the heading's text without its Markdown (code
  marks, emphasis, link targets), lowercased, every character other than a
  letter, a digit, a mark, '_', '-' or a space dropped, each space turned
  into '-'; a repeated slug gets -1, -2, ... in order.
- Paths in backticks. In every code span and fenced code block, each word
  (split at white space and '=') that starts with one of this repository's
  top-level folders and a '/' (KNOWN below) is a path that must exist,
  after dropping a trailing ':LINE', '#anchor' and punctuation ,.;:)'".
  Skipped, by rule: a word with a glob or placeholder character (* ? [ ] {
  } < > $ ~ |), with '...' or '…', with a folder or file name that is a
  placeholder in capitals without a dot (N, NAME, FILE), and every path
  outside KNOWN (build/..., out/..., a path relative to the document). A
  word without an extension also holds when a file of that name with an
  extension is in its folder: a program named after its source
  (`tests/test_cuda_exec` for tests/test_cuda_exec.c).
- Sections named in prose. A Markdown file named by its path (in
  backticks or not), then an optional ',' and a double-quoted text, as in
  docs/CUDA.md, "The executor's design": a heading of that file must begin
  with the quoted text (white space and case aside, code marks dropped).
Exit status: 0 when everything holds, 1 with one line per problem.
"""
import os
import re
import shutil
import sys
import tempfile
import unicodedata

KNOWN = ("cmake", "docs", "examples", "include", "python", "scripts", "src",
         "tests", "tools")
SKIP_CHARS = set("*?[]{}<>$~|")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(
    r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)", re.S)
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)", re.M)
HTML_ANCHOR = re.compile(r"<a\s+[^>]*?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")
SECTION_REF = re.compile(r"`?((?:[\w.-]+/)*[\w.-]+\.md)`?,?\s+\"([^\"]+)\"")


def split_code(text):
    """(prose, unfenced, spans): the text with fenced blocks and code spans
    blanked, the text with fenced blocks blanked (line numbers kept in
    both), and [(line, code)] for every block and span."""
    out, spans = [], []
    fence, block, start = None, [], 0
    for i, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                spans.append((start, "\n".join(block)))
                fence = None
            else:
                block.append(line)
            out.append("")
            continue
        if m:
            fence, block, start = m.group(1), [], i + 1
            out.append("")
            continue
        out.append(line)
    if fence:
        spans.append((start, "\n".join(block)))
    prose = "\n".join(out)

    def blank(m):
        spans.append((prose.count("\n", 0, m.start()) + 1, m.group(2)))
        return re.sub(r"[^\n]", " ", m.group(0))
    return CODE_SPAN.sub(blank, prose), prose, spans


def heading_text(raw):
    s = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    s = re.sub(r"<[^>]+>", "", s)
    return s.replace("`", "")


def slug(text):
    keep = []
    for ch in heading_text(text).strip().lower():
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LNM":
            keep.append("-" if ch == " " else ch)
    return "".join(keep)


def norm(text):
    return " ".join(heading_text(text).replace("*", "").split()).lower()


def headings(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            _, unfenced, _ = split_code(f.read())
        cache[path] = [norm(m.group(2)) for m in map(HEADING.match, unfenced.split("\n")) if m]
    return cache[path]


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        _, unfenced, _ = split_code(text)
        seen, found = {}, set()
        for line in unfenced.split("\n"):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else "%s-%d" % (s, n))
        found.update(a for a in HTML_ANCHOR.findall(text))
        cache[path] = found
    return cache[path]


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


COUNT = {"links": 0, "paths": 0, "sections": 0}


def check_link(root, doc, target, where, problems):
    COUNT["links"] += 1
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target):
        return
    path, _, anchor = target.partition("#")
    path = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), path)
    if path:
        full = os.path.normpath(os.path.join(root, path.lstrip("/")) if path.startswith("/")
                                else os.path.join(os.path.dirname(doc), path))
        if not os.path.exists(full):
            problems.append("%s: link to '%s': no such file" % (where, target))
            return
    else:
        full = doc
    if anchor and full.endswith(".md") and os.path.isfile(full):
        if anchor not in anchors(full):
            problems.append("%s: link to '%s': no heading '#%s' in %s" % (
                where, target, anchor, os.path.relpath(full, root)))


def path_words(code):
    for word in re.split(r"[\s=]+", code):
        word = word.strip("(\"'")
        if not word.startswith(tuple(k + "/" for k in KNOWN)):
            continue
        if any(c in SKIP_CHARS for c in word) or "..." in word or "…" in word:
            continue
        word = word.split("#")[0]
        word = re.sub(r":\d+(?::\d+)?$", "", word)
        word = word.rstrip(",.;:)'\"")
        if any(PLACEHOLDER.match(part) for part in word.split("/") if part):
            continue
        yield word


def exists(root, word):
    """The path exists, or it names a program after its source: a word
    without an extension is accepted when a file of that name with one
    exists in the same folder (`tests/test_cuda_exec`, built from
    tests/test_cuda_exec.c)."""
    full = os.path.join(root, word)
    if os.path.exists(full):
        return True
    d, name = os.path.split(full.rstrip("/"))
    return ("." not in name and os.path.isdir(d) and
            any(f.startswith(name + ".") for f in os.listdir(d)))


def check_doc(root, doc, problems):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(doc, root)
    prose, _, spans = split_code(text)
    for m in INLINE_LINK.finditer(prose):
        check_link(root, doc, m.group(2), "%s:%d" % (rel, line_of(prose, m.start())), problems)
    for m in REF_DEF.finditer(prose):
        check_link(root, doc, m.group(2), "%s:%d" % (rel, line_of(prose, m.start())), problems)
    for m in SECTION_REF.finditer(text):
        COUNT["sections"] += 1
        name, title = m.group(1), norm(m.group(2))
        where = "%s:%d" % (rel, line_of(text, m.start()))
        cands = [os.path.join(os.path.dirname(doc), name), os.path.join(root, name),
                 os.path.join(root, "docs", name)]
        target = next((c for c in cands if os.path.isfile(c)), None)
        if target is None:
            problems.append("%s: section \"%s\" of %s: no such file" % (where, m.group(2), name))
        elif not any(h.startswith(title) for h in headings(target)):
            problems.append("%s: section \"%s\" of %s: no heading begins so" % (
                where, " ".join(m.group(2).split()), name))
    for line, code in spans:
        for word in path_words(code):
            COUNT["paths"] += 1
            if not exists(root, word):
                problems.append("%s:%d: names `%s`: no such file or folder in the repository"
                                % (rel, line + code.count("\n", 0, code.find(word)), word))


def docs_of(root):
    docs = [os.path.join(root, p) for p in ("README.md", "python/README.md")]
    for d, _, files in os.walk(os.path.join(root, "docs")):
        docs += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
    return [d for d in docs if os.path.isfile(d)]


def check(root):
    problems = []
    for doc in docs_of(root):
        check_doc(root, doc, problems)
    return problems


def self_test():
    tmp = tempfile.mkdtemp()
    try:
        def write(rel, text):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        write("src/core/bind.c", "")
        write("tests/layers.sh", "")
        write("docs/B.md",
              "# B\n\n## The `hbg_bind` cost (µs), 2× faster: pinned-eager\n\n"
              "## Twice\n\n## Twice\n\n<a id=\"kept\"></a>\n\n```\n# not a heading\n```\n")
        good = ("# Good\n\n[b](docs/B.md), [b's heading](docs/B.md#the-hbg_bind-cost-µs-2-faster-pinned-eager),\n"
                "[second](docs/B.md#twice-1), [html](docs/B.md#kept), [here](#good),\n"
                "[a link whose text\nwraps](docs/B.md) and [web](https://example.com/x#y).\n\n"
                "[ref]: docs/B.md#twice\n\n"
                "`src/core/bind.c`, `tests/layers.sh:12`, `src/core/` and `docs/B.md`;\n"
                "skipped: `build/bin/hbg`, `tests/test_*.c`, `src/<file>.c`, `docs/N/x.md`,\n"
                "`scripts/...`, `out/x.json`, `$V/include`.\n\n"
                "See docs/B.md, \"The `hbg_bind`\ncost\" and `docs/B.md` \"Twice\".\n\n"
                "```sh\nHBG=build/bin/hbg tests/layers.sh --self-test\n```\n")
        write("README.md", good)
        got = check(tmp)
        if got:
            print("self-test: a good tree was refused:\n  " + "\n  ".join(got))
            return 1
        write("docs/bad.md",
              "# Bad\n\nA [broken link](missing.md), a [broken anchor](B.md#no-such-heading),\n"
              "and `src/core/missing.c` named.\n\n```\nscripts/gone.sh --x\n```\n\n"
              "A [link whose text\nwraps](gone/x.md).\n\nAs docs/B.md, \"No such section\" says.\n")
        got = check(tmp)
        want = [("docs/bad.md:3", "link to 'missing.md': no such file"),
                ("docs/bad.md:3", "no heading '#no-such-heading'"),
                ("docs/bad.md:4", "names `src/core/missing.c`"),
                ("docs/bad.md:7", "names `scripts/gone.sh`"),
                ("docs/bad.md:10", "link to 'gone/x.md': no such file"),
                ("docs/bad.md:13", "section \"No such section\" of docs/B.md")]
        missed = [w for w in want if not any(g.startswith(w[0]) and w[1] in g for g in got)]
        if missed or len(got) != len(want):
            print("self-test: expected %d problems %s, got:\n  %s" % (
                len(want), [w[1] for w in missed], "\n  ".join(got)))
            return 1
        print("self-test: ok (a good tree passes; a broken link, a broken anchor "
              "and missing paths are caught)")
        return 0
    finally:
        shutil.rmtree(tmp)


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(os.path.abspath(argv[1]))
    for p in problems:
        print(p)
    if problems:
        print("docs_links: %d problem(s)" % len(problems))
        return 1
    print("docs_links: ok (%d documents, %d links, %d named paths, %d named sections)" % (
        len(docs_of(os.path.abspath(argv[1]))), COUNT["links"], COUNT["paths"],
        COUNT["sections"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
