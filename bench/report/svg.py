"""Small SVG charts for docs/BENCHMARKS.md, from the standard library only.

Two kinds of chart:
- bars_log(): grouped horizontal bars on a log axis (one group per workload,
  one bar per engine, a whisker from min to max);
- lines_log(): small multiples, one panel per workload, x = categories (op
  sizes), y on a log axis, one line per engine, with reference lines.
Both return the SVG document as a string; colours are fixed per engine so
every chart reads the same way.
"""

import math
from xml.sax.saxutils import escape

COLORS = {
    "serial": "#636363",
    "vf-naive": "#9ecae1",
    "vf-pooled": "#2171b5",
    "vf-perdev": "#08306b",
    "vf-bulk64": "#6a51a3",
    "omp-gcc": "#e6550d",
    "omp-clang": "#fdae6b",
    "spu-eager": "#31a354",
    "spu-lws": "#a1d99b",
    "tbb-flow": "#756bb1",
}
FONT = 'font-family="Helvetica, Arial, sans-serif"'


def color(name):
    return COLORS.get(name, "#999999")


def _decades(lo, hi):
    a = math.floor(math.log10(lo))
    b = math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return a, b


def _tick_label(exp):
    v = 10.0 ** exp
    if v >= 1:
        return "%d" % v
    return ("%.*f" % (-exp, v))


class _Doc:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=11, anchor="start", weight="normal", fill="#222",
             rotate=None):
        tr = ' transform="rotate(%d %.1f %.1f)"' % (rotate, x, y) if rotate else ""
        self.add('<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" '
                 'font-weight="%s" fill="%s" %s%s>%s</text>'
                 % (x, y, size, anchor, weight, fill, FONT, tr, escape(s)))

    def line(self, x1, y1, x2, y2, stroke="#ccc", width=1, dash=None):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" '
                 'stroke-width="%s"%s/>' % (x1, y1, x2, y2, stroke, width, d))

    def rect(self, x, y, w, h, fill, title=None):
        t = "<title>%s</title>" % escape(title) if title else ""
        self.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>'
                 % (x, y, max(w, 0.5), h, fill, t))

    def render(self):
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                'viewBox="0 0 %d %d">\n<rect width="100%%" height="100%%" fill="white"/>\n'
                % (self.w, self.h, self.w, self.h) + "\n".join(self.parts) + "\n</svg>\n")


def _legend(doc, x, y, names, width):
    cx, cy = x, y
    for n in names:
        w = 22 + 7 * len(n)
        if cx + w > x + width:
            cx, cy = x, cy + 16
        doc.rect(cx, cy - 9, 12, 10, color(n))
        doc.text(cx + 16, cy, n, size=11)
        cx += w + 10
    return cy


def bars_log(title, subtitle, groups, engines, unit):
    """groups: [(label, {engine: (median, min, max) or None})], log x axis."""
    bar_h, gap = 9, 12
    label_w, plot_w, right = 190, 560, 30
    top = 62
    vals = [v for _, g in groups for e in engines for v in (g.get(e) or ())[:3] if v and v > 0]
    if not vals:
        vals = [1.0]
    a, b = _decades(min(vals), max(vals))
    group_h = bar_h * len(engines) + gap
    h = top + group_h * len(groups) + 40
    doc = _Doc(label_w + plot_w + right, h + 24)
    doc.text(10, 20, title, size=14, weight="bold")
    doc.text(10, 36, subtitle, size=11, fill="#555")
    legend_bottom = _legend(doc, 10, 54, engines, label_w + plot_w)
    shift = legend_bottom - 54
    top += shift
    doc.h += shift

    def xpos(v):
        return label_w + plot_w * (math.log10(v) - a) / (b - a)

    bottom = top + group_h * len(groups)
    for k in range(a, b + 1):
        x = xpos(10.0 ** k)
        doc.line(x, top - 4, x, bottom, stroke="#bbb")
        doc.text(x, bottom + 14, _tick_label(k), size=10, anchor="middle")
        if k < b:
            for m in (2, 5):
                xm = xpos(m * 10.0 ** k)
                doc.line(xm, top - 4, xm, bottom, stroke="#eee")
    doc.text(label_w + plot_w / 2, bottom + 30, unit + " (log scale)", size=11,
             anchor="middle")
    y = top
    for label, g in groups:
        doc.text(label_w - 8, y + group_h / 2, label, size=11, anchor="end")
        for i, e in enumerate(engines):
            v = g.get(e)
            yy = y + i * bar_h
            if not v:
                continue
            med, lo, hi = v
            x0 = label_w
            doc.rect(x0, yy + 1, xpos(med) - x0, bar_h - 2, color(e),
                     "%s: %s %.4g [%.4g-%.4g]" % (e, unit, med, lo, hi))
            doc.line(xpos(lo), yy + bar_h / 2, xpos(hi), yy + bar_h / 2, stroke="#000",
                     width=0.8)
        doc.line(label_w, y + group_h - gap / 2, label_w + plot_w, y + group_h - gap / 2,
                 stroke="#f0f0f0")
        y += group_h
    doc.line(label_w, top - 4, label_w, bottom, stroke="#444")
    return doc.render()


def lines_log(title, subtitle, panels, engines, xlabels, refs, ylabel, cols=4):
    """panels: [(label, {engine: [y or None per x]})]; refs: [(y, text)]."""
    pw, ph = 200, 150
    ml, mt, gapx, gapy = 50, 70, 30, 55
    rows = (len(panels) + cols - 1) // cols
    vals = [v for _, p in panels for e in engines for v in (p.get(e) or []) if v]
    vals += [r[0] for r in refs]
    a, b = _decades(min(vals), max(vals))
    width = ml + cols * (pw + gapx) + 10
    doc = _Doc(width, 0)
    doc.text(10, 20, title, size=14, weight="bold")
    doc.text(10, 36, subtitle, size=11, fill="#555")
    legend_bottom = _legend(doc, 10, 54, engines, width - 20)
    mt = legend_bottom + 22
    doc.h = mt + rows * (ph + gapy) + 10
    for idx, (label, p) in enumerate(panels):
        r, c = divmod(idx, cols)
        x0 = ml + c * (pw + gapx)
        y0 = mt + r * (ph + gapy)

        def ypos(v):
            return y0 + ph - ph * (math.log10(v) - a) / (b - a)

        def xpos(i):
            n = len(xlabels)
            return x0 + (pw * (i + 0.5) / n)

        doc.text(x0 + pw / 2, y0 - 6, label, size=11, anchor="middle", weight="bold")
        doc.add('<rect x="%.1f" y="%.1f" width="%d" height="%d" fill="none" stroke="#999"/>'
                % (x0, y0, pw, ph))
        for k in range(a, b + 1):
            y = ypos(10.0 ** k)
            doc.line(x0, y, x0 + pw, y, stroke="#e5e5e5")
            if c == 0:
                doc.text(x0 - 4, y + 3, _tick_label(k), size=9, anchor="end")
        for yv, txt in refs:
            doc.line(x0, ypos(yv), x0 + pw, ypos(yv), stroke="#888", dash="4,3")
            if c == cols - 1 or idx == len(panels) - 1:
                doc.text(x0 + pw + 2, ypos(yv) + 3, txt, size=8, fill="#666")
        for i, xl in enumerate(xlabels):
            doc.text(xpos(i), y0 + ph + 13, xl, size=9, anchor="middle")
        for e in engines:
            ys = p.get(e)
            if not ys:
                continue
            pts = [(xpos(i), ypos(v)) for i, v in enumerate(ys) if v]
            if len(pts) > 1:
                doc.add('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                        % (color(e), " ".join("%.1f,%.1f" % q for q in pts)))
            for q in pts:
                doc.add('<circle cx="%.1f" cy="%.1f" r="2.8" fill="%s"/>'
                        % (q[0], q[1], color(e)))
    doc.text(14, mt + rows * (ph + gapy) / 2, ylabel, size=11, anchor="middle", rotate=-90)
    return doc.render()
