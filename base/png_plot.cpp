#include "base/png_plot.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <csetjmp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace moeedb {

namespace {

// A 5x7 bitmap font: each glyph seven rows of five pixels ('#' set).
const std::map<char, std::array<const char*, 7>>& Font() {
  static const std::map<char, std::array<const char*, 7>> kFont = {
      {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
      {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
      {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
      {'3', {"####.", "....#", "....#", ".###.", "....#", "....#", "####."}},
      {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
      {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
      {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
      {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
      {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
      {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
      {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
      {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
      {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
      {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
      {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
      {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
      {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
      {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
      {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
      {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
      {'b', {"#....", "#....", "####.", "#...#", "#...#", "#...#", "####."}},
      {'c', {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."}},
      {'d', {"....#", "....#", ".####", "#...#", "#...#", "#...#", ".####"}},
      {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
      {'f', {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."}},
      {'g', {".....", ".####", "#...#", "#...#", ".####", "....#", ".###."}},
      {'h', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
      {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
      {'j', {"...#.", ".....", "..##.", "...#.", "...#.", "#..#.", ".##.."}},
      {'k', {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."}},
      {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
      {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"}},
      {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
      {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
      {'p', {".....", ".....", "####.", "#...#", "####.", "#....", "#...."}},
      {'q', {".....", ".....", ".####", "#...#", ".####", "....#", "....#"}},
      {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
      {'s', {".....", ".....", ".####", "#....", ".###.", "....#", "####."}},
      {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
      {'u', {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"}},
      {'v', {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
      {'w', {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."}},
      {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
      {'y', {".....", ".....", "#...#", "#...#", ".####", "....#", ".###."}},
      {'z', {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"}},
  };
  return kFont;
}

// A number as a tick label: up to 4 significant digits, no trailing zeros.
std::string TickLabel(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), rgb_(static_cast<size_t>(w) * h * 3, 255) {}
  void Set(int x, int y, unsigned char r, unsigned char g, unsigned char b) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    unsigned char* p = &rgb_[(static_cast<size_t>(y) * w_ + x) * 3];
    p[0] = r, p[1] = g, p[2] = b;
  }
  void Line(int xa, int ya, int xb, int yb, unsigned char r, unsigned char g, unsigned char b, int thick) {
    const int steps = std::max({std::abs(xb - xa), std::abs(yb - ya), 1});
    for (int i = 0; i <= steps; ++i) {
      const int x = xa + (xb - xa) * i / steps, y = ya + (yb - ya) * i / steps;
      for (int dx = -thick / 2; dx <= thick / 2; ++dx)
        for (int dy = -thick / 2; dy <= thick / 2; ++dy) Set(x + dx, y + dy, r, g, b);
    }
  }
  // Text in the 5x7 font, 6 pixels a character, its top left at (x, y);
  // `vertical` writes it bottom to top (the y axis' title).
  void Text(const std::string& s, int x, int y, bool vertical = false) {
    for (size_t i = 0; i < s.size(); ++i) {
      auto it = Font().find(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i]))));
      if (it == Font().end()) continue;
      for (int row = 0; row < 7; ++row)
        for (int col = 0; col < 5; ++col)
          if (it->second[row][col] == '#') {
            const int off = static_cast<int>(i) * 6;
            if (vertical) Set(x + row, y - off - col, 60, 60, 60);
            else Set(x + off + col, y + row, 60, 60, 60);
          }
    }
  }
  static int TextWidth(const std::string& s) { return static_cast<int>(s.size()) * 6; }
  const std::vector<unsigned char>& rgb() const { return rgb_; }

 private:
  int w_, h_;
  std::vector<unsigned char> rgb_;
};

void WriteToString(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}

}  // namespace

Result<std::string> EncodePng(const std::vector<unsigned char>& rgb, int width, int height) {
  if (width <= 0 || height <= 0 || rgb.size() != static_cast<size_t>(width) * height * 3)
    return Status::InvalidArgument("an RGB image of " + std::to_string(width) + " x " + std::to_string(height) +
                                   " needs " + std::to_string(std::max(0, width * height * 3)) + " bytes");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return Status::Internal("libpng: cannot create a writer");
  }
  std::string out;
  std::vector<png_bytep> rows(height);
  for (int y = 0; y < height; ++y)
    rows[y] = const_cast<png_bytep>(rgb.data() + static_cast<size_t>(y) * width * 3);
  if (setjmp(png_jmpbuf(png))) {  // libpng reports its errors by longjmp here
    png_destroy_write_struct(&png, &info);
    return Status::Internal("libpng: encoding failed");
  }
  png_set_write_fn(png, &out, WriteToString, nullptr);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
  png_set_compression_level(png, 9);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Status WriteLinePlotPng(const std::string& path, const std::vector<PlotSeries>& series, const PlotLabels& labels,
                        int width, int height) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (x0 > x1) return Status::InvalidArgument("nothing to plot");
  if (x1 == x0) x1 = x0 + 1;
  const double pad = std::max(1e-9, (y1 - y0) * 0.05);
  y0 -= pad;
  y1 += pad;
  Canvas c(width, height);
  // Margins: room for the y ticks and title on the left, the x ticks and title below, the title above.
  const int left = 70, right = 20, top = labels.title.empty() ? 20 : 34, bottom = 48;
  const int pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * pw)); };
  auto py = [&](double y) { return height - bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * ph)); };
  for (int t = 0; t <= 4; ++t) {  // grid and ticks
    const int gx = left + t * pw / 4, gy = top + t * ph / 4;
    c.Line(gx, top, gx, height - bottom, 225, 225, 225, 1);
    c.Line(left, gy, width - right, gy, 225, 225, 225, 1);
    const std::string xl = TickLabel(x0 + (x1 - x0) * t / 4), yl = TickLabel(y1 - (y1 - y0) * t / 4);
    c.Text(xl, gx - Canvas::TextWidth(xl) / 2, height - bottom + 6);
    c.Text(yl, left - 6 - Canvas::TextWidth(yl), gy - 3);
  }
  c.Line(left, height - bottom, width - right, height - bottom, 0, 0, 0, 1);  // axes
  c.Line(left, top, left, height - bottom, 0, 0, 0, 1);
  c.Text(labels.x, left + pw / 2 - Canvas::TextWidth(labels.x) / 2, height - 16);
  c.Text(labels.y, 6, top + ph / 2 + Canvas::TextWidth(labels.y) / 2, /*vertical=*/true);
  c.Text(labels.title, left + pw / 2 - Canvas::TextWidth(labels.title) / 2, 10);
  for (const auto& s : series) {
    size_t best = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (s.y[i] > s.y[best]) best = i;
      if (i > 0) c.Line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), s.r, s.g, s.b, 2);
    }
    if (!s.x.empty())
      for (int d = -4; d <= 4; ++d)
        c.Line(px(s.x[best]) - 4, py(s.y[best]) + d, px(s.x[best]) + 4, py(s.y[best]) + d, s.r, s.g, s.b, 1);
  }
  MOEEDB_ASSIGN_OR_RETURN(std::string png, EncodePng(c.rgb(), width, height));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(png.data(), static_cast<std::streamsize>(png.size()));
  f.flush();
  if (!f) return Status::IOError("cannot write " + path);
  return Status::OK();
}

}  // namespace moeedb
