// The viewer's platform layer: a GLFW 3.3 window with an OpenGL 3.3 core context, the Dear
// ImGui context and its GLFW/OpenGL3 backends (from Debian's libimgui-dev).
//
// A hidden window renders into an offscreen framebuffer of exactly the requested size, so
// `--screenshot` and the tests get the same pixels under Xvfb as a person gets on screen.
// Scripted input (tests, screenshots) is written into ImGuiIO after the backend's own input,
// so the views see it exactly as they see a mouse and keyboard.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

struct GLFWwindow;
struct ImGuiContext;

namespace hs::ui {

/// GLFW's codes of the keys the viewer binds besides letters (which are their ASCII upper case).
namespace keys {
inline constexpr int kEscape = 256, kEnter = 257, kF1 = 290, kF3 = 292;
}

/// Input for one frame, in window pixels. Keys are GLFW key codes (letters are their ASCII
/// upper case, e.g. 'W').
struct ScriptedInput {
  float x = -1, y = -1;  ///< mouse position; negative = outside the window
  bool down[3] = {false, false, false};  ///< left, right, middle
  float wheel = 0;       ///< wheel clicks, positive = away from the user (zoom in)
  bool ctrl = false, shift = false;
  std::vector<int> keys;  ///< keys held this frame
  std::string text;       ///< characters typed this frame (io.AddInputCharacter each)
};

class GlWindow {
 public:
  /// Opens a `width` × `height` window (hidden → offscreen framebuffer). Throws
  /// std::runtime_error saying why when there is no display or no OpenGL 3.3 context (the
  /// message suggests xvfb-run).
  GlWindow(int width, int height, bool visible, const std::string& title);
  ~GlWindow();
  GlWindow(const GlWindow&) = delete;
  GlWindow& operator=(const GlWindow&) = delete;

  bool should_close() const;
  /// One frame: polls events, applies `input` when given, calls `draw(width, height)` between
  /// ImGui::NewFrame and ImGui::Render, renders, and swaps a visible window.
  void frame(const std::function<void(float, float)>& draw, const ScriptedInput* input = nullptr);
  /// The last rendered frame as RGBA8, rows top to bottom (width × height × 4 bytes).
  std::vector<uint8_t> read_rgba() const;
  int width() const { return m_width; }
  int height() const { return m_height; }
  /// The width in pixels ImGui draws `text` with (the UI font), after the first frame.
  float text_width(const std::string& text) const;
  /// The GL renderer string (e.g. "llvmpipe (LLVM 15.0.6, 256 bits)").
  std::string renderer() const;

 private:
  GLFWwindow* m_window = nullptr;
  ImGuiContext* m_imgui = nullptr;
  bool m_visible;
  int m_width, m_height;
  unsigned m_fbo = 0, m_color = 0;
};

/// RGBA8 pixels (rows top to bottom) encoded as a PNG file's bytes (stb_image_write). Throws
/// std::invalid_argument when `rgba` holds fewer than width × height pixels.
std::string encode_png(int width, int height, const std::vector<uint8_t>& rgba);

/// `bytes` written to `path` (a plain stream, checked). Throws std::runtime_error naming the file
/// and the reason when it cannot be written.
void write_file(const std::filesystem::path& path, const std::string& bytes);

/// encode_png through write_file.
void write_png(const std::filesystem::path& path, int width, int height, const std::vector<uint8_t>& rgba);

}  // namespace hs::ui
