// The SVG timeline of an activation plan (renderMemoryPlanSVG in MemoryPlanner.h):
// instruction position left to right, arena offset bottom to top, one rectangle per
// buffer, and the live-bytes curve (its maximum is the lower bound of the arena).

#include "kiln/Memory/MemoryPlanner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln {

namespace {

std::string xmlEscape(const std::string &s) {
  std::string r;
  for (char c : s) {
    switch (c) {
    case '&':
      r += "&amp;";
      break;
    case '<':
      r += "&lt;";
      break;
    case '>':
      r += "&gt;";
      break;
    case '"':
      r += "&quot;";
      break;
    default:
      r += c;
    }
  }
  return r;
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about \p n ticks over \p range.
double niceStep(double range, int n) {
  if (range <= 0)
    return 1;
  double raw = range / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

std::string fmt(const char *f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

} // namespace

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// The picture's geometry: instruction positions left to right over \p n, arena offsets
/// bottom to top over \p arena bytes.
struct Frame {
  double W = 1600, H = 900, left = 90, right = 30, top = 70, bottom = 60;
  double pw = W - left - right, ph = H - top - bottom;
  double n = 1, arena = 1;
  double X(double pos) const { return left + pos / n * pw; }
  double Y(double off) const { return top + ph - off / arena * ph; }
};

/// Grid lines with their values on both axes, and the axis titles.
void drawAxes(std::ostream &os, const Frame &fr) {
  os << "<g stroke=\"#ccc\" stroke-width=\"1\" font-size=\"11\" fill=\"#333\">\n";
  double ys = niceStep(fr.arena / kMiB, 8);
  for (double v = 0; v <= fr.arena / kMiB + 1e-9; v += ys) {
    double y = fr.Y(v * kMiB);
    os << "<line x1=\"" << fr.left << "\" y1=\"" << y << "\" x2=\"" << fr.left + fr.pw
       << "\" y2=\"" << y << "\"/>\n";
    os << "<text stroke=\"none\" x=\"" << fr.left - 6 << "\" y=\"" << y + 4
       << "\" text-anchor=\"end\">" << fmt(ys < 1 ? "%.2f" : "%.0f", v) << "</text>\n";
  }
  double xs = niceStep(fr.n, 12);
  for (double v = 0; v <= fr.n + 1e-9; v += xs) {
    double x = fr.X(v);
    os << "<line x1=\"" << x << "\" y1=\"" << fr.top << "\" x2=\"" << x << "\" y2=\""
       << fr.top + fr.ph << "\"/>\n";
    os << "<text stroke=\"none\" x=\"" << x << "\" y=\"" << fr.top + fr.ph + 16
       << "\" text-anchor=\"middle\">" << fmt("%.0f", v) << "</text>\n";
  }
  os << "</g>\n";
  os << "<text x=\"" << fr.left + fr.pw / 2 << "\" y=\"" << fr.H - 18
     << "\" font-size=\"13\" text-anchor=\"middle\">instruction position</text>\n";
  os << "<text transform=\"translate(22," << fr.top + fr.ph / 2
     << ") rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">offset in the activation arena "
        "(MiB)</text>\n";
}

/// A buffer's label inside its rectangle [x0, x1] x [y0, y1]: IRGen's ".res" suffix
/// dropped; when too long, the tail (the most specific part) is kept. Tall narrow
/// rectangles get vertical labels.
void drawBufferLabel(std::ostream &os, std::string name, double x0, double x1, double y0,
                     double y1) {
  double w = std::max(1.0, x1 - x0), h = std::max(0.8, y1 - y0);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".res") == 0)
    name.resize(name.size() - 4);
  auto fit = [&](double len, double thick) {
    double fs = std::min(11.0, thick * 0.75);
    size_t chars = size_t(std::max(0.0, (len - 4) / (fs * 0.6)));
    return std::make_pair(fs, chars);
  };
  auto [fs, chars] = fit(w, h);
  bool vertical = false;
  if (chars < std::min<size_t>(name.size(), 10) && h > w) {
    auto [vfs, vchars] = fit(h, w);
    if (vfs >= 6 && vchars > chars) {
      fs = vfs;
      chars = vchars;
      vertical = true;
    }
  }
  if (fs < 6 || chars < 4)
    return;
  if (name.size() > chars)
    name = "~" + name.substr(name.size() - (chars - 1));
  os << "<text stroke=\"none\" fill=\"#111\" font-size=\"" << fmt("%.1f", fs) << "\" ";
  if (vertical)
    os << "transform=\"translate(" << (x0 + x1) / 2 + fs * 0.35 << "," << y1 - 2
       << ") rotate(-90)\"";
  else
    os << "x=\"" << x0 + 2 << "\" y=\"" << (y0 + y1) / 2 + fs * 0.35 << "\"";
  os << ">" << xmlEscape(name) << "</text>\n";
}

/// Buffer \p i: its rectangle (offset and live range), a tooltip and a label.
void drawBuffer(std::ostream &os, const Frame &fr, const PlannedBuffer &b, size_t i) {
  double x0 = fr.X(double(b.start)), x1 = fr.X(double(b.end));
  double y0 = fr.Y(double(b.offset + b.size)), y1 = fr.Y(double(b.offset));
  double w = std::max(1.0, x1 - x0), h = std::max(0.8, y1 - y0);
  int hue = int((i * 137) % 360);
  os << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << h
     << "\" fill=\"hsl(" << hue << ",65%,72%)\"><title>"
     << xmlEscape("%" + b.value->getName() + ": " + b.value->getType()->toString() + ", " +
                  fmt("%.3f MiB", b.size / kMiB) + " at offset " + std::to_string(b.offset) +
                  ", live [" + std::to_string(b.start) + ", " + std::to_string(b.end) + ")")
     << "</title></rect>\n";
  drawBufferLabel(os, b.value->getName(), x0, x1, y0, y1);
}

/// The live bytes at each position, the max-live line (dashed) and the arena size line.
void drawLiveBytes(std::ostream &os, const Frame &fr, const MemoryPlan &plan,
                   const std::vector<const PlannedBuffer *> &acts) {
  std::vector<int64_t> delta(plan.numInstrs + 2, 0);
  for (const PlannedBuffer *b : acts) {
    uint64_t s = (b->size + plan.alignment - 1) / plan.alignment * plan.alignment;
    delta[b->start] += int64_t(s);
    delta[std::min(b->end, plan.numInstrs + 1)] -= int64_t(s);
  }
  os << "<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"1.2\" stroke-opacity=\"0.8\" "
        "points=\"";
  int64_t live = 0;
  for (size_t p = 0; p < plan.numInstrs; p++) {
    live += delta[p];
    os << fr.X(double(p)) << "," << fr.Y(double(live)) << " " << fr.X(double(p + 1)) << ","
       << fr.Y(double(live)) << " ";
  }
  os << "\"/>\n";
  double ym = fr.Y(double(plan.maxLiveBytes)), ya = fr.Y(double(plan.activationBytes));
  os << "<line x1=\"" << fr.left << "\" y1=\"" << ym << "\" x2=\"" << fr.left + fr.pw
     << "\" y2=\"" << ym << "\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n";
  os << "<line x1=\"" << fr.left << "\" y1=\"" << ya << "\" x2=\"" << fr.left + fr.pw
     << "\" y2=\"" << ya << "\" stroke=\"#000\" stroke-width=\"1.5\"/>\n";
}

void drawLegend(std::ostream &os, const Frame &fr) {
  double lx = fr.left + fr.pw - 330, ly = 30;
  os << "<g font-size=\"12\">\n"
     << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly
     << "\" stroke=\"#c00\" stroke-width=\"1.5\"/><text x=\"" << lx + 30 << "\" y=\"" << ly + 4
     << "\">live bytes (dashed: max-live)</text>\n"
     << "<line x1=\"" << lx << "\" y1=\"" << ly + 18 << "\" x2=\"" << lx + 24 << "\" y2=\""
     << ly + 18 << "\" stroke=\"#000\" stroke-width=\"1.5\"/><text x=\"" << lx + 30 << "\" y=\""
     << ly + 22 << "\">arena size</text>\n</g>\n";
}

} // namespace

std::string renderMemoryPlanSVG(const IRFunction &F, const MemoryPlan &plan,
                                const std::string &title) {
  std::vector<const PlannedBuffer *> acts;
  for (const PlannedBuffer &b : plan.buffers)
    if (b.region == MemoryRegion::Activation)
      acts.push_back(&b);
  Frame fr;
  fr.n = std::max<double>(1, double(plan.numInstrs));
  fr.arena = std::max<double>(1, double(std::max(plan.activationBytes, plan.maxLiveBytes)));

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fr.W << "\" height=\"" << fr.H
     << "\" viewBox=\"0 0 " << fr.W << " " << fr.H << "\" font-family=\"sans-serif\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string head = title.empty() ? F.getName() : title;
  os << "<text x=\"" << fr.left << "\" y=\"26\" font-size=\"18\" font-weight=\"bold\">"
     << xmlEscape("Activation memory plan: " + head) << "</text>\n";
  os << "<text x=\"" << fr.left << "\" y=\"48\" font-size=\"13\">"
     << xmlEscape(fmt("arena %.2f MiB", plan.activationBytes / kMiB) +
                  fmt(", max-live %.2f MiB", plan.maxLiveBytes / kMiB) +
                  fmt(", efficiency %.1f%%", 100 * plan.efficiency()) + ", " +
                  std::to_string(acts.size()) + " buffers, " + std::to_string(plan.numInstrs) +
                  " instructions, placement " + plan.strategy)
     << "</text>\n";
  drawAxes(os, fr);
  os << "<g stroke=\"#333\" stroke-width=\"0.6\">\n";
  for (size_t i = 0; i < acts.size(); i++)
    drawBuffer(os, fr, *acts[i], i);
  os << "</g>\n";
  drawLiveBytes(os, fr, plan, acts);
  drawLegend(os, fr);
  os << "</svg>\n";
  return os.str();
}

} // namespace kiln
