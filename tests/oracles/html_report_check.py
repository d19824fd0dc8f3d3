"""Reads a `hookscope report --html` page with Python's html.parser and prints what a reviewer's
browser would find in it, as JSON: references to anything outside the file, active content
(scripts, frames, event handlers), in-page links without a target, every table (id, header, body rows as cell texts), the
settings (section#settings' top-level definition list), and per inline <svg> its element count,
its texts (<text> and <title>) and whether it parses as XML on its own. --svg FILE... does the
same for standalone SVG files (report --assets).

Usage: html_report_check.py --html report.html [--svg a.svg b.svg ...]
"""
import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

# Attributes that make a browser load something.
URL_ATTRS = {"src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "data", "background",
             "manifest", "ping", "cite", "longdesc", "codebase", "archive"}
ACTIVE_TAGS = {"script", "iframe", "frame", "object", "embed", "applet", "link", "base", "meta-refresh", "img",
               "video", "audio", "source", "track", "foreignobject", "use", "image", "feimage"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Elements svg allows to be self-closing in our output.
SVG_SELF_CLOSING = {"rect", "line", "path", "circle", "polyline", "polygon", "ellipse"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.external, self.active, self.errors = [], [], []
        self.stack = []
        self.tables, self.svgs = [], []
        self.settings = {}
        self.ids, self.fragments = set(), []  # element ids; targets of href="#..."
        self._table = None
        self._cell = None
        self._row = None
        self._in_thead = False
        self._svg = None
        self._svg_text = None
        self._settings_depth = None  # stack depth of section#settings
        self._dl_depth = None
        self._dt = None
        self._dd = None
        self.headings = []
        self._heading = None

    def _check_attrs(self, tag, attrs):
        for k, v in attrs:
            k = k.lower()
            v = v or ""
            if k in URL_ATTRS and not v.startswith("#"):
                self.external.append([tag, k, v])
            if k.startswith("on"):
                self.active.append([tag, k])
            if k == "style" and re.search(r"url\(\s*['\"]?(?!#)", v):
                self.external.append([tag, k, v])
            if k == "http-equiv" and v.lower() == "refresh":
                self.active.append([tag, k])

    def handle_starttag(self, tag, attrs):
        self._check_attrs(tag, attrs)
        if tag in ACTIVE_TAGS:
            self.active.append([tag, ""])
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if (a.get("href") or "").startswith("#"):
            self.fragments.append(a["href"][1:])
        if tag == "section" and a.get("id") == "settings":
            self._settings_depth = len(self.stack)
        if self._settings_depth is not None and tag == "dl" and self._dl_depth is None:
            self._dl_depth = len(self.stack)
        if self._dl_depth is not None and len(self.stack) == self._dl_depth + 1:
            if tag == "dt":
                self._dt = ""
            elif tag == "dd":
                self._dd = ""
        if tag == "table":
            self._table = {"id": a.get("id", ""), "header": [], "rows": []}
        elif tag == "thead":
            self._in_thead = True
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""
        if tag == "svg":
            self._svg = {"elements": 0, "texts": [], "label": a.get("aria-label", "")}
        if self._svg is not None:
            self._svg["elements"] += 1
            if tag in ("text", "title"):
                self._svg_text = ""
        if tag in ("h1", "h2", "h3", "h4"):
            self._heading = ""
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID and tag not in SVG_SELF_CLOSING and tag != "svg":
            self.errors.append("self-closing <%s/>" % tag)
        self._check_attrs(tag, attrs)
        if tag in ACTIVE_TAGS:
            self.active.append([tag, ""])
        if self._svg is not None:
            self._svg["elements"] += 1

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else "nothing"))
            if tag in self.stack:
                while self.stack and self.stack[-1] != tag:
                    self.stack.pop()
        if self.stack:
            self.stack.pop()
        if tag in ("td", "th") and self._cell is not None:
            (self._table["header"] if self._in_thead else self._row).append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._in_thead:
                self._table["rows"].append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_thead = False
        elif tag == "table" and self._table is not None:
            self.tables.append(self._table)
            self._table = None
        if tag in ("text", "title") and self._svg is not None and self._svg_text is not None:
            self._svg["texts"].append(self._svg_text)
            self._svg_text = None
        if tag == "svg" and self._svg is not None:
            self.svgs.append(self._svg)
            self._svg = None
        if tag in ("h1", "h2", "h3", "h4") and self._heading is not None:
            self.headings.append(self._heading.strip())
            self._heading = None
        if self._dl_depth is not None and len(self.stack) == self._dl_depth + 1:
            if tag == "dt" and self._dt is not None:
                self._key = self._dt.strip()
                self._dt = None
            elif tag == "dd" and self._dd is not None:
                self.settings[getattr(self, "_key", "")] = self._dd.strip()
                self._dd = None
        if tag == "dl" and self._dl_depth is not None and len(self.stack) == self._dl_depth:
            self._dl_depth = -1  # only the first definition list of the section
        if tag == "section" and self._settings_depth is not None and len(self.stack) == self._settings_depth:
            self._settings_depth = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._svg_text is not None:
            self._svg_text += data
        if self._heading is not None:
            self._heading += data
        if self._dt is not None:
            self._dt += data
        if self._dd is not None:
            self._dd += data


def svg_file(path):
    text = open(path, encoding="utf-8").read()
    out = {"path": path, "xml_ok": True, "elements": 0, "texts": [], "external": []}
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        out["xml_ok"] = False
        out["error"] = str(e)
        return out
    for el in root.iter():
        out["elements"] += 1
        tag = el.tag.split("}")[-1]
        if tag in ("text", "title"):
            out["texts"].append("".join(el.itertext()))
        for k, v in el.attrib.items():
            if k.split("}")[-1] in URL_ATTRS and not v.startswith("#"):
                out["external"].append([tag, k, v])
        if tag in ACTIVE_TAGS:
            out["external"].append([tag, "", ""])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--html")
    ap.add_argument("--svg", nargs="*", default=[])
    a = ap.parse_args()
    result = {}
    if a.html:
        raw = open(a.html, encoding="utf-8").read()
        p = Page()
        p.feed(raw)
        p.close()
        if p.stack:
            p.errors.append("unclosed: " + " ".join(p.stack))
        # Each inline picture must stand alone as XML too.
        inline_xml = []
        for m in re.finditer(r"<svg\b.*?</svg>", raw, re.S):
            try:
                ET.fromstring(m.group(0))
                inline_xml.append(True)
            except ET.ParseError:
                inline_xml.append(False)
        css_imports = len(re.findall(r"@import|@font-face", raw))
        result.update({"external": p.external, "active": p.active, "errors": p.errors, "tables": p.tables,
                       "svgs": p.svgs, "settings": p.settings, "headings": p.headings, "svg_xml_ok": inline_xml,
                       "css_imports": css_imports,
                       "broken_fragments": [f for f in p.fragments if f not in p.ids], "doctype": raw.lstrip().lower().startswith("<!doctype html>")})
    result["svg_files"] = [svg_file(f) for f in a.svg]
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
