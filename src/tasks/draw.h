// Drawing on RGB images for visual checks: box outlines and text labels in a built-in 5x7 bitmap font.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tasks/image_io.h"

namespace qd {

using Color = std::array<uint8_t, 3>;

// A distinct, stable colour for a class index (any int).
Color class_color(int index);
// Outline of the box with corners (x0, y0) and (x1, y1) inclusive, `thickness` pixels drawn inwards; clipped.
void draw_rect(Image& img, int x0, int y0, int x1, int y1, const Color& color, int thickness = 2);
// Text with its top-left corner at (x, y), each font pixel drawn as scale x scale; clipped. Lower case is drawn as
// upper case; characters the font lacks are drawn as '?'.
void draw_text(Image& img, int x, int y, const std::string& text, const Color& color, int scale = 1);
// Width and height in pixels of text drawn by draw_text.
int text_width(const std::string& text, int scale = 1);
int text_height(int scale = 1);
// A filled label (text on a box of `background`) placed above (x, y), or below it when there is no room above.
void draw_label(Image& img, int x, int y, const std::string& text, const Color& background, int scale = 1);

}  // namespace qd
