#!/usr/bin/env python3
"""Every ```cpp block in README.md, docs/*.md and kernels/**/*.md is either compiled or quoted.

A block is one of:
  * preceded by `<!-- quoted from PATH -->`: it appears verbatim in PATH (a file
    of the repository), as a run of consecutive lines (a common indentation of
    the run is allowed);
  * preceded by `<!-- compiled in PATH -->`: PATH is a test source listed in a
    tests/*/tests.cmake; the block's leading #include lines appear in PATH and
    the rest appears verbatim as consecutive lines (indentation as above), so the
    test compiles and runs it;
  * otherwise a whole translation unit: `extract` writes it (with #line pointing
    at the page) into the build, where CMake compiles it (target hg_doc_snippets).

  doc_snippets.py extract SOURCE_DIR OUT_DIR   write the whole-TU blocks, list them
  doc_snippets.py check SOURCE_DIR OUT_DIR     check the markers; exit 1 naming doc:line
"""
import pathlib
import re
import sys

MARKER = re.compile(r"^<!-- (quoted from|compiled in) (\S+) -->\s*$")


def docs(root):
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md")) + sorted((root / "kernels").glob("**/*.md"))
    return [p for p in pages if p.is_file()]


def blocks(page):
    """Yields (line number of the ```cpp fence, marker or None, block lines)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i
            prev = lines[i - 1] if i > 0 else ""
            m = MARKER.match(prev)
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise SystemExit(f"{page}:{start + 1}: ```cpp block is never closed")
            yield start + 1, (m.group(1), m.group(2)) if m else None, body
        i += 1


def dedent(lines):
    indents = [len(l) - len(l.lstrip(" ")) for l in lines if l.strip()]
    k = min(indents) if indents else 0
    return [l[k:] if l.strip() else "" for l in lines]


def contains_run(haystack, needle):
    """True when `needle` equals some run of consecutive lines of `haystack`
    after removing that run's common indentation."""
    needle = [l.rstrip() for l in dedent(needle)]
    while needle and not needle[0]:
        needle.pop(0)
    while needle and not needle[-1]:
        needle.pop()
    if not needle:
        return True
    n = len(needle)
    hay = [l.rstrip() for l in haystack]
    for i in range(len(hay) - n + 1):
        if hay[i].strip() == needle[0].strip() and [l.rstrip() for l in dedent(hay[i:i + n])] == needle:
            return True
    return False


def tu_name(root, page, line):
    rel = page.relative_to(root).as_posix().replace("/", "_").replace(".", "_")
    return f"{rel}_L{line}.cpp"


def check(root):
    errors = []
    test_lists = "\n".join(p.read_text() for p in (root / "tests").glob("*/tests.cmake"))
    for page in docs(root):
        rel = page.relative_to(root)
        for line, marker, body in blocks(page):
            if marker is None:
                continue  # compiled as a whole TU by the build
            kind, path = marker
            target = root / path
            if not target.is_file():
                errors.append(f"{rel}:{line}: `{kind} {path}`: no such file in the repository")
                continue
            text = target.read_text(encoding="utf-8").split("\n")
            rest = body
            if kind == "compiled in":
                if pathlib.PurePosixPath(path).name not in test_lists:
                    errors.append(f"{rel}:{line}: {path} is not a test source in any tests/*/tests.cmake")
                includes = []
                while rest and (rest[0].startswith("#include") or not rest[0].strip()):
                    if rest[0].strip():
                        includes.append(rest[0].strip())
                    rest = rest[1:]
                stripped = [l.strip() for l in text]
                for inc in includes:
                    if inc not in stripped:
                        errors.append(f"{rel}:{line}: `{inc}` is not in {path}")
            if not contains_run(text, rest):
                errors.append(f"{rel}:{line}: the ```cpp block is not verbatim in {path} "
                              f"(it must appear there as consecutive lines)")
    return errors


def extract(root, out):
    out.mkdir(parents=True, exist_ok=True)
    wanted = {}
    for page in docs(root):
        for line, marker, body in blocks(page):
            if marker is not None:
                continue
            src = "\n".join(body) + "\n"
            # A page that shows the CUDA backend's API compiles only where it exists.
            cuda = "kernels/cuda/" in src or "runtime/cuda/" in src
            text = (f"// Generated from {page.relative_to(root).as_posix()}:{line} by "
                    f"tests/docs/doc_snippets.py; edit the page, not this file.\n")
            if cuda:
                text += "#if defined(HG_WITH_CUDA)\n"
            text += f'#line {line + 1} "{page.relative_to(root).as_posix()}"\n' + src
            if cuda:
                text += "#endif\n"
            wanted[tu_name(root, page, line)] = text
    for old in out.glob("*.cpp"):
        if old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        f = out / name
        if not f.is_file() or f.read_text() != text:  # keep the date: no rebuild
            f.write_text(text)
        print(f)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("extract", "check"):
        raise SystemExit(__doc__)
    root, out = pathlib.Path(sys.argv[2]).resolve(), pathlib.Path(sys.argv[3])
    if sys.argv[1] == "extract":
        extract(root, out)
        return
    errors = check(root)
    # The whole-TU blocks: the build compiled what extract wrote; a page edited
    # since the last configure is stale.
    for page in docs(root):
        for line, marker, body in blocks(page):
            if marker is None and not (out / tu_name(root, page, line)).is_file():
                errors.append(f"{page.relative_to(root)}:{line}: this ```cpp block has no marker and was "
                              f"not compiled (re-run cmake), or mark it <!-- quoted from PATH --> / "
                              f"<!-- compiled in tests/...cpp -->")
    for e in errors:
        print(e)
    n = sum(1 for p in docs(root) for _ in blocks(p))
    print(f"doc snippets: {n} blocks in {len(docs(root))} pages, {len(errors)} problem(s)")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
