// A line chart written as a PNG with no image library: RGB pixels drawn
// here, stored in the PNG as uncompressed deflate blocks (valid zlib, CRC32
// and Adler-32 computed here). Enough for the harness's Spearman-vs-alpha plot.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb::eval {

struct PlotSeries {
  std::vector<double> x, y;
  unsigned char r = 0, g = 0, b = 0;  // line colour
};

// Axes span the data (y padded by 5 %); light grid lines at 5 ticks; a dot
// marks each series' maximum. No text: the caller prints the legend.
Status WriteLinePlotPng(const std::string& path, const std::vector<PlotSeries>& series, int width = 640,
                        int height = 400);

// PNG bytes of an RGB image (row-major, 3 bytes per pixel).
std::string EncodePng(const std::vector<unsigned char>& rgb, int width, int height);

}  // namespace moeedb::eval
