// Box outlines and bitmap-font labels: pixels land where expected and nothing is drawn out of bounds.
#include <gtest/gtest.h>

#include "tasks/draw.h"

namespace qd {
namespace {

TEST(Draw, RectOutline) {
  Image img(20, 20, 0);
  draw_rect(img, 2, 3, 12, 15, {255, 0, 0}, 2);
  EXPECT_EQ(img.pixel(2, 3)[0], 255);
  EXPECT_EQ(img.pixel(12, 15)[0], 255);
  EXPECT_EQ(img.pixel(3, 9)[0], 255);   // second ring of the left edge
  EXPECT_EQ(img.pixel(4, 9)[0], 0);     // inside
  EXPECT_EQ(img.pixel(1, 3)[0], 0);     // outside
  EXPECT_EQ(img.pixel(2, 3)[1], 0);
  draw_rect(img, -5, -5, 100, 100, {1, 2, 3}, 3);  // clipped, no crash
  EXPECT_EQ(img.pixel(0, 0)[2], 0);     // the ring lies outside the image
}

TEST(Draw, TextAndLabels) {
  Image img(64, 20, 0);
  EXPECT_EQ(text_width("AB", 1), 11);
  EXPECT_EQ(text_height(2), 14);
  draw_text(img, 1, 1, "T-shirt/top 0.9", {255, 255, 255}, 1);
  int lit = 0;
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 64; ++x) lit += img.pixel(x, y)[0] == 255;
  }
  EXPECT_GT(lit, 40);
  EXPECT_EQ(img.pixel(0, 0)[0], 0);
  EXPECT_EQ(img.pixel(1, 1)[0], 255);  // top bar of 'T'
  EXPECT_EQ(img.pixel(3, 7)[0], 255);  // stem of 'T'
  EXPECT_EQ(img.pixel(1, 7)[0], 0);
  // A label at the corner goes below the point and stays inside the image.
  Image small(30, 30, 0);
  draw_label(small, 25, 0, "bag", class_color(8), 1);
  EXPECT_NE(small.pixel(29, 0)[0] + small.pixel(29, 0)[1] + small.pixel(29, 0)[2], 0);
  draw_text(small, -100, -100, "X", {9, 9, 9});
  draw_text(small, 28, 28, "\x01~", {9, 9, 9}, 3);  // unknown characters are drawn as '?', clipped
  EXPECT_NE(class_color(0), class_color(1));
  EXPECT_EQ(class_color(123), class_color(123));
}

}  // namespace
}  // namespace qd
