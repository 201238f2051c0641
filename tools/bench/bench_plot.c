/* ipcpipe-bench --plot: a line chart of GB/s against size, written by rank
 * 0 after the run as standalone SVG 1.1 (no tool needed to make it; any
 * browser shows it).  The x axis is log2 of the size, labelled with powers
 * of two (8, 4K, 1M, 1G); the y axis is linear, with gridlines.  One solid
 * line per path or reference (nccl, naive, ...), with a marker per
 * measured point, and one dashed line per ceiling; a legend names them.
 * Polylines carry class="series" or class="ceiling" and a <title> with
 * their name, so that a script can find them. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PX_W     960
#define PX_H     560
#define M_LEFT   80
#define M_RIGHT  220
#define M_TOP    64
#define M_BOTTOM 64
#define PLOT_W   (PX_W - M_LEFT - M_RIGHT)
#define PLOT_H   (PX_H - M_TOP - M_BOTTOM)
#define X_TICKS  12 /* at most this many size labels */

typedef struct pt {
    double x; /* log2(size) */
    double y; /* GB/s */
    size_t size;
} pt_t;

typedef struct series {
    char name[48];
    int ceiling; /* dashed */
    const char *color;
    pt_t *pts;
    int n;
} series_t;

typedef struct chart {
    series_t *s;
    int n, cap;
    int npts_max; /* points a series can hold (rows of the run) */
    double xmin, xmax, ymax, ystep;
    int logy; /* GB/s on a log10 axis from ymin (a power of ten) */
    double ymin;
    FILE *f;
} chart_t;

static const char *const path_colors[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
};
static const char *const ceil_colors[] = {
    "#444444", "#b8860b", "#006d77", "#7b2cbf", "#9c6644", "#2f4f4f",
};

static series_t *find_series(chart_t *ch, const char *name, int ceiling)
{
    for (int k = 0; k < ch->n; k++)
        if (ch->s[k].ceiling == ceiling && strcmp(ch->s[k].name, name) == 0)
            return &ch->s[k];
    if (ch->n == ch->cap)
        return NULL;
    series_t *s = &ch->s[ch->n++];
    int nth = 0;
    for (int k = 0; k < ch->n - 1; k++)
        nth += ch->s[k].ceiling == ceiling;
    bench_fmt(s->name, sizeof(s->name), "%s", name);
    s->ceiling = ceiling;
    s->color = ceiling ? ceil_colors[nth % (int)(sizeof(ceil_colors) /
                                                 sizeof(ceil_colors[0]))]
                       : path_colors[nth % (int)(sizeof(path_colors) /
                                                 sizeof(path_colors[0]))];
    s->pts = calloc((size_t)ch->npts_max, sizeof(pt_t));
    s->n = 0;
    return s->pts ? s : NULL;
}

/* One point per size: a ceiling shows once however many rows share it. */
static void add_point(series_t *s, int cap, size_t size, double gbps)
{
    double x = log2((double)size);
    for (int k = 0; k < s->n; k++)
        if (s->pts[k].x == x)
            return;
    if (s->n < cap)
        s->pts[s->n++] = (pt_t){x, gbps, size};
}

static int cmp_pt(const void *a, const void *b)
{
    double d = ((const pt_t *)a)->x - ((const pt_t *)b)->x;
    return d < 0 ? -1 : d > 0;
}

static int collect(chart_t *ch, const bench_result_t *rs, int n)
{
    for (int i = 0; i < n; i++) {
        const bench_result_t *r = &rs[i];
        if (!r->c)
            continue;
        if (r->outcome == BENCH_OK && r->gbps > 0 && isfinite(r->gbps)) {
            series_t *s = find_series(ch, r->c->path->name, 0);
            if (!s)
                return -1;
            add_point(s, ch->npts_max, r->c->size, r->gbps);
        }
        if (r->ceiling_gbps > 0 && isfinite(r->ceiling_gbps)) {
            series_t *s = find_series(ch, bench_ceil_name(r->ceiling_kind), 1);
            if (!s)
                return -1;
            add_point(s, ch->npts_max, r->c->size, r->ceiling_gbps);
        }
    }
    return 0;
}

/* A step of 1, 2 or 5 times a power of ten giving about 6 gridlines. */
static double nice_step(double top)
{
    double raw = top / 6, mag = pow(10, floor(log10(raw)));
    double m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

static void scales(chart_t *ch)
{
    double xmin = INFINITY, xmax = -INFINITY, ymax = 0, ymin = INFINITY;
    for (int k = 0; k < ch->n; k++) {
        series_t *s = &ch->s[k];
        qsort(s->pts, (size_t)s->n, sizeof(pt_t), cmp_pt);
        for (int j = 0; j < s->n; j++) {
            xmin = fmin(xmin, s->pts[j].x);
            xmax = fmax(xmax, s->pts[j].x);
            ymax = fmax(ymax, s->pts[j].y);
            if (s->pts[j].y > 0)
                ymin = fmin(ymin, s->pts[j].y);
        }
    }
    if (!isfinite(xmin)) /* nothing measured: an empty frame */
        xmin = 3, xmax = 30;
    if (xmax - xmin < 1)
        xmin -= 1, xmax += 1;
    /* A little room so that no marker sits on the frame. */
    ch->xmin = xmin - 0.2;
    ch->xmax = xmax + 0.2;
    if (!(ymax > 0))
        ymax = 1;
    if (ch->logy) {
        /* Whole decades: a line of 0.01 GB/s stays apart from one of 400. */
        if (!isfinite(ymin))
            ymin = ymax;
        ch->ymin = pow(10, floor(log10(ymin)));
        ch->ymax = pow(10, ceil(log10(ymax)));
        if (ch->ymax <= ch->ymin)
            ch->ymax = ch->ymin * 10;
        return;
    }
    ch->ystep = nice_step(ymax * 1.05);
    ch->ymax = ceil(ymax * 1.05 / ch->ystep) * ch->ystep;
}

static double px_x(const chart_t *ch, double x)
{
    return M_LEFT + (x - ch->xmin) / (ch->xmax - ch->xmin) * PLOT_W;
}

static double px_y(const chart_t *ch, double y)
{
    if (ch->logy) {
        double lo = log10(ch->ymin), hi = log10(ch->ymax);
        double v = y > ch->ymin ? log10(y) : lo;
        return M_TOP + PLOT_H - (v - lo) / (hi - lo) * PLOT_H;
    }
    return M_TOP + PLOT_H - y / ch->ymax * PLOT_H;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

/* As the sizes are written on the command line: 4K, 1G, and 1G+1 for a
 * size just past a round one. */
static void size_label(size_t size, char *buf, size_t len)
{
    static const char units[] = "TGMK";
    for (int u = 0; u < 4; u++) {
        size_t unit = (size_t)1 << (10 * (4 - u));
        size_t rem = size % unit;
        if (size >= unit && rem != 0 && rem < unit / 1024) {
            bench_fmt(buf, len, "%zu%c+%zu", size / unit, units[u], rem);
            return;
        }
    }
    bench_format_size(size, buf, len);
}

/* The sizes measured, when there are few enough to label each; else
 * powers of two, every step-th.  Returns the count. */
static int x_ticks(const chart_t *ch, size_t *ticks)
{
    int n = 0;
    for (int k = 0; k < ch->n; k++) {
        for (int j = 0; j < ch->s[k].n; j++) {
            size_t sz = ch->s[k].pts[j].size;
            int seen = 0;
            for (int t = 0; t < n && !seen; t++)
                seen = ticks[t] == sz;
            if (!seen && n <= X_TICKS)
                ticks[n++] = sz;
        }
    }
    if (n > 0 && n <= X_TICKS)
        return n;
    int lo = (int)ceil(ch->xmin), hi = (int)floor(ch->xmax);
    int step = (hi - lo) / X_TICKS + 1;
    n = 0;
    for (int k = lo < 0 ? 0 : lo; k <= hi && k < 64; k += step)
        ticks[n++] = (size_t)1 << k;
    return n;
}

static void grid_x(chart_t *ch)
{
    FILE *f = ch->f;
    size_t ticks[64 + X_TICKS];
    int n = x_ticks(ch, ticks);
    fprintf(f, "<g class=\"x-grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (int t = 0; t < n; t++) {
        double x = px_x(ch, log2((double)ticks[t]));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x,
                M_TOP, x, M_TOP + PLOT_H);
    }
    fprintf(f, "</g>\n<g class=\"x-labels\" text-anchor=\"middle\">\n");
    for (int t = 0; t < n; t++) {
        char lab[48];
        size_label(ticks[t], lab, sizeof(lab));
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%s</text>\n",
                px_x(ch, log2((double)ticks[t])), M_TOP + PLOT_H + 18, lab);
    }
    fprintf(f, "</g>\n");
}

/* Log axis: lines at 1, 2 and 5 of every decade, labels at 1 and 5
 * (%g keeps 0.01 and 500 as written). */
static void grid_y_log(chart_t *ch)
{
    FILE *f = ch->f;
    static const double marks[] = {1, 2, 5};
    fprintf(f, "<g class=\"y-grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (double d = ch->ymin; d < ch->ymax * 1.0001; d *= 10)
        for (int m = 0; m < 3 && marks[m] * d <= ch->ymax * 1.0001; m++)
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n",
                    M_LEFT, px_y(ch, marks[m] * d), M_LEFT + PLOT_W,
                    px_y(ch, marks[m] * d));
    fprintf(f, "</g>\n<g class=\"y-labels\" text-anchor=\"end\">\n");
    for (double d = ch->ymin; d < ch->ymax * 1.0001; d *= 10)
        for (int m = 0; m < 3 && marks[m] * d <= ch->ymax * 1.0001; m += 2)
            fprintf(f, "<text x=\"%d\" y=\"%.1f\">%g</text>\n", M_LEFT - 8,
                    px_y(ch, marks[m] * d) + 4, marks[m] * d);
    fprintf(f, "</g>\n");
}

static void grid_y(chart_t *ch)
{
    FILE *f = ch->f;
    if (ch->logy) {
        grid_y_log(ch);
        return;
    }
    int decimals = ch->ystep >= 1 ? 0 : (int)ceil(-log10(ch->ystep));
    fprintf(f, "<g class=\"y-grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (double y = 0; y <= ch->ymax * 1.0001; y += ch->ystep)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n",
                M_LEFT, px_y(ch, y), M_LEFT + PLOT_W, px_y(ch, y));
    fprintf(f, "</g>\n<g class=\"y-labels\" text-anchor=\"end\">\n");
    for (double y = 0; y <= ch->ymax * 1.0001; y += ch->ystep)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%.*f</text>\n", M_LEFT - 8,
                px_y(ch, y) + 4, decimals, y);
    fprintf(f, "</g>\n");
}

static void frame(chart_t *ch, const char *subtitle)
{
    FILE *f = ch->f;
    fprintf(f,
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
            "fill=\"white\"/>\n",
            PX_W, PX_H);
    fprintf(f,
            "<text x=\"%d\" y=\"26\" font-size=\"17\" "
            "font-weight=\"bold\">ipcpipe-bench: bandwidth against "
            "size</text>\n",
            M_LEFT);
    fprintf(f,
            "<text class=\"subtitle\" x=\"%d\" y=\"46\" font-size=\"12\" "
            "fill=\"#555555\">",
            M_LEFT);
    xml_text(f, subtitle ? subtitle : "");
    fprintf(f, "</text>\n");
    grid_x(ch);
    grid_y(ch);
    fprintf(f,
            "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" "
            "height=\"%d\" fill=\"none\" stroke=\"#333333\"/>\n",
            M_LEFT, M_TOP, PLOT_W, PLOT_H);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">size in "
            "bytes (log2 scale)</text>\n",
            M_LEFT + PLOT_W / 2, PX_H - 16);
    fprintf(f,
            "<text x=\"20\" y=\"%d\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 20 %d)\">GB/s (1e9 bytes/s, median%s)"
            "</text>\n",
            M_TOP + PLOT_H / 2, M_TOP + PLOT_H / 2,
            ch->logy ? ", log10 scale" : "");
}

static void lines(chart_t *ch)
{
    FILE *f = ch->f;
    /* Ceilings first, so that the measured lines are drawn over them. */
    for (int pass = 1; pass >= 0; pass--) {
        for (int k = 0; k < ch->n; k++) {
            series_t *s = &ch->s[k];
            if (s->ceiling != pass)
                continue;
            fprintf(f,
                    "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" "
                    "stroke-width=\"%s\"%s points=\"",
                    s->ceiling ? "ceiling" : "series", s->color,
                    s->ceiling ? "1.5" : "2.2",
                    s->ceiling ? " stroke-dasharray=\"7,5\"" : "");
            for (int j = 0; j < s->n; j++)
                fprintf(f, "%s%.1f,%.1f", j ? " " : "", px_x(ch, s->pts[j].x),
                        px_y(ch, s->pts[j].y));
            fprintf(f, "\"><title>%s", s->ceiling ? "ceiling: " : "");
            xml_text(f, s->name);
            fprintf(f, "</title></polyline>\n");
            if (s->ceiling)
                continue;
            fprintf(f, "<g class=\"markers\" fill=\"%s\">\n", s->color);
            for (int j = 0; j < s->n; j++)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n",
                        px_x(ch, s->pts[j].x), px_y(ch, s->pts[j].y));
            fprintf(f, "</g>\n");
        }
    }
}

static void legend(chart_t *ch)
{
    FILE *f = ch->f;
    int x = M_LEFT + PLOT_W + 20, y = M_TOP + 8;
    fprintf(f, "<g class=\"legend\">\n");
    for (int pass = 0; pass <= 1; pass++) {
        for (int k = 0; k < ch->n; k++) {
            series_t *s = &ch->s[k];
            if (s->ceiling != pass)
                continue;
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                    "stroke=\"%s\" stroke-width=\"%s\"%s/>\n",
                    x, y, x + 28, y, s->color, s->ceiling ? "1.5" : "2.2",
                    s->ceiling ? " stroke-dasharray=\"7,5\"" : "");
            fprintf(f, "<text x=\"%d\" y=\"%d\">%s", x + 36, y + 4,
                    s->ceiling ? "ceiling: " : "");
            xml_text(f, s->name);
            fprintf(f, "</text>\n");
            y += 20;
        }
    }
    if (ch->n == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\">no case measured</text>\n", x, y);
    fprintf(f, "</g>\n");
}

int bench_plot_write(const char *path, int logy, const bench_result_t *rs,
                     int n, const char *subtitle, char *err, size_t elen)
{
    chart_t ch = {.cap = 2 * (bench_npaths + BENCH_CEIL_COUNT),
                  .npts_max = n > 0 ? n : 1,
                  .logy = logy};
    int rc = -1;
    ch.s = calloc((size_t)ch.cap, sizeof(*ch.s));
    if (!ch.s || collect(&ch, rs, n) < 0) {
        bench_fmt(err, elen, "out of memory");
        goto out;
    }
    scales(&ch);
    ch.f = fopen(path, "w");
    if (!ch.f) {
        bench_fmt(err, elen, "cannot open for writing: %s", strerror(errno));
        goto out;
    }
    fprintf(ch.f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<title>ipcpipe-bench: GB/s against size</title>\n",
            PX_W, PX_H, PX_W, PX_H);
    frame(&ch, subtitle);
    lines(&ch);
    legend(&ch);
    fprintf(ch.f, "</svg>\n");
    int werr = ferror(ch.f);
    if (fclose(ch.f) != 0 || werr)
        bench_fmt(err, elen, "writing failed: %s",
                  strerror(errno ? errno : EIO));
    else
        rc = 0;
out:
    for (int k = 0; ch.s && k < ch.n; k++)
        free(ch.s[k].pts);
    free(ch.s);
    return rc;
}
