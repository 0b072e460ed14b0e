#include "eval/png_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

namespace moeedb::eval {

namespace {

uint32_t Crc32(const unsigned char* data, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void Put32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

void Chunk(std::string* out, const char* type, const std::string& data) {
  Put32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out->append(body);
  Put32(out, Crc32(reinterpret_cast<const unsigned char*>(body.data()), body.size()));
}

}  // namespace

std::string EncodePng(const std::vector<unsigned char>& rgb, int width, int height) {
  // Raw scanlines, each prefixed by filter type 0.
  std::string raw;
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.append(reinterpret_cast<const char*>(rgb.data()) + static_cast<size_t>(y) * width * 3,
               static_cast<size_t>(width) * 3);
  }
  // zlib stream of stored blocks (at most 65535 bytes each).
  std::string z = {0x78, 0x01};
  for (size_t off = 0; off < raw.size() || off == 0; off += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - off);
    const bool last = off + n >= raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<char>(n & 0xff));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff));
    z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z.append(raw, off, n);
    if (last) break;
  }
  uint32_t a = 1, b = 0;
  for (unsigned char ch : raw) {
    a = (a + ch) % 65521;
    b = (b + a) % 65521;
  }
  Put32(&z, (b << 16) | a);

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  Put32(&ihdr, static_cast<uint32_t>(width));
  Put32(&ihdr, static_cast<uint32_t>(height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, no filter, no interlace
  Chunk(&png, "IHDR", ihdr);
  Chunk(&png, "IDAT", z);
  Chunk(&png, "IEND", "");
  return png;
}

Status WriteLinePlotPng(const std::string& path, const std::vector<PlotSeries>& series, int width, int height) {
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
  std::vector<unsigned char> img(static_cast<size_t>(width) * height * 3, 255);
  const int m = 30;  // margin
  auto px = [&](double x) { return m + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (width - 2 * m))); };
  auto py = [&](double y) { return height - m - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (height - 2 * m))); };
  auto set = [&](int x, int y, unsigned char r, unsigned char g, unsigned char b) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    unsigned char* p = &img[(static_cast<size_t>(y) * width + x) * 3];
    p[0] = r;
    p[1] = g;
    p[2] = b;
  };
  auto line = [&](int xa, int ya, int xb, int yb, unsigned char r, unsigned char g, unsigned char b, int thick) {
    const int steps = std::max({std::abs(xb - xa), std::abs(yb - ya), 1});
    for (int i = 0; i <= steps; ++i) {
      const int x = xa + (xb - xa) * i / steps, y = ya + (yb - ya) * i / steps;
      for (int dx = -thick / 2; dx <= thick / 2; ++dx)
        for (int dy = -thick / 2; dy <= thick / 2; ++dy) set(x + dx, y + dy, r, g, b);
    }
  };
  for (int t = 0; t <= 4; ++t) {  // grid
    const int gx = m + t * (width - 2 * m) / 4, gy = m + t * (height - 2 * m) / 4;
    line(gx, m, gx, height - m, 225, 225, 225, 1);
    line(m, gy, width - m, gy, 225, 225, 225, 1);
  }
  line(m, height - m, width - m, height - m, 0, 0, 0, 1);  // axes
  line(m, m, m, height - m, 0, 0, 0, 1);
  for (const auto& s : series) {
    size_t best = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (s.y[i] > s.y[best]) best = i;
      if (i > 0) line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), s.r, s.g, s.b, 2);
    }
    if (!s.x.empty())
      for (int d = -4; d <= 4; ++d) line(px(s.x[best]) - 4, py(s.y[best]) + d, px(s.x[best]) + 4, py(s.y[best]) + d, s.r, s.g, s.b, 1);
  }
  const std::string png = EncodePng(img, width, height);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(png.data(), static_cast<std::streamsize>(png.size()));
  f.flush();
  if (!f) return Status::IOError("cannot write " + path);
  return Status::OK();
}

}  // namespace moeedb::eval
