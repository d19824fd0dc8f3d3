#include "ui/window.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <filesystem>
#include <system_error>

#if defined(__SANITIZE_ADDRESS__)  // GCC's -fsanitize=address (./run test --sanitize)
#define HOOKSCOPE_ASAN 1
#include <dlfcn.h>
#include <link.h>
#endif

#define GL_GLEXT_PROTOTYPES 1
#include <GL/gl.h>
#include <GL/glext.h>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include "ui/typography.h"

namespace hs::ui {

namespace {
std::string g_glfw_error;
void on_glfw_error(int, const char* what) { g_glfw_error = what ? what : "?"; }

#if defined(HOOKSCOPE_ASAN)
// ASan builds only. glfwTerminate unloads the GL driver (Mesa's swrast_dri.so under Xvfb) while
// a few of its blocks stay pointed to from its static data: LeakSanitizer, which checks at exit,
// no longer sees that data and reports the blocks as leaked from an "<unknown module>" (no
// suppression can name it). Taking one more reference on every library loaded so far (never
// released) keeps the driver mapped to the end, its blocks reachable, and needs no suppression.
void keep_loaded_libraries_mapped() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  for (const std::string& name : names) dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
#endif
}  // namespace

GlWindow::GlWindow(int width, int height, bool visible, const std::string& title)
    : m_visible(visible), m_width(width), m_height(height) {
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    const char* display = std::getenv("DISPLAY");
    throw std::runtime_error(
        "cannot open a window: " + g_glfw_error +
        (display && *display ? std::string(" (DISPLAY=") + display + ")" : std::string(" (DISPLAY is not set)")) +
        ". Without a desktop, run under a virtual X server: xvfb-run -a hookscope view FILE --screenshot OUT.png");
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
  m_window = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (!m_window) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3.3 window: " + g_glfw_error);
  }
  glfwMakeContextCurrent(m_window);
#if defined(HOOKSCOPE_ASAN)
  keep_loaded_libraries_mapped();  // the context's driver is loaded now
#endif
  glfwSwapInterval(visible ? 1 : 0);
  if (!visible) {
    // Offscreen target of exactly the requested size.
    glGenFramebuffers(1, &m_fbo);
    glGenRenderbuffers(1, &m_color);
    glBindRenderbuffer(GL_RENDERBUFFER, m_color);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
    glBindFramebuffer(GL_FRAMEBUFFER, m_fbo);
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, m_color);
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
      glfwDestroyWindow(m_window);
      glfwTerminate();
      throw std::runtime_error("cannot create an offscreen framebuffer of " + std::to_string(width) + "x" +
                               std::to_string(height));
    }
  }
  IMGUI_CHECKVERSION();
  m_imgui = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // no imgui.ini written into the working directory
  // ImGui's default font (ASCII) with the report's '×', '†', '–' and '−' merged in (ui/typography.h).
  io.Fonts->AddFontDefault();
  if (std::error_code ec; std::filesystem::is_regular_file(kTypographyFont, ec)) {
    static const ImWchar kRanges[] = {0x00D7, 0x00D7, 0x2013, 0x2013, 0x2020, 0x2020, 0x2212, 0x2212, 0};
    ImFontConfig merge;
    merge.MergeMode = true;
    io.Fonts->AddFontFromFileTTF(kTypographyFont, 13.0f, &merge, kRanges);
  }
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 2;
  ImGui_ImplGlfw_InitForOpenGL(m_window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
}

GlWindow::~GlWindow() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext(m_imgui);
  if (m_fbo) glDeleteFramebuffers(1, &m_fbo);
  if (m_color) glDeleteRenderbuffers(1, &m_color);
  glfwDestroyWindow(m_window);
  glfwTerminate();
}

bool GlWindow::should_close() const { return glfwWindowShouldClose(m_window); }

float GlWindow::text_width(const std::string& text) const { return ImGui::CalcTextSize(text.c_str()).x; }

std::string GlWindow::renderer() const {
  const GLubyte* r = glGetString(GL_RENDERER);
  return r ? reinterpret_cast<const char*>(r) : "?";
}

void GlWindow::frame(const std::function<void(float, float)>& draw, const ScriptedInput* input) {
  // On screen, sleep until input arrives (or 50 ms pass): an idle viewer costs nothing.
  if (m_visible)
    glfwWaitEventsTimeout(0.05);
  else
    glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (!m_visible) {
    io.DisplaySize = ImVec2(static_cast<float>(m_width), static_cast<float>(m_height));
    io.DisplayFramebufferScale = ImVec2(1, 1);
  } else {
    glfwGetFramebufferSize(m_window, &m_width, &m_height);
  }
  if (input) {
    io.MousePos = input->x < 0 ? ImVec2(-FLT_MAX, -FLT_MAX) : ImVec2(input->x, input->y);
    for (int i = 0; i < 3; ++i) io.MouseDown[i] = input->down[i];
    io.MouseWheel = input->wheel;
    io.KeyCtrl = input->ctrl;
    io.KeyShift = input->shift;
    std::memset(io.KeysDown, 0, sizeof io.KeysDown);
    for (int k : input->keys)
      if (k >= 0 && k < static_cast<int>(IM_ARRAYSIZE(io.KeysDown))) io.KeysDown[k] = true;
    for (unsigned char c : input->text) io.AddInputCharacter(c);
  }
  ImGui::NewFrame();
  draw(io.DisplaySize.x, io.DisplaySize.y);
  ImGui::Render();
  glBindFramebuffer(GL_FRAMEBUFFER, m_fbo);
  glViewport(0, 0, m_width, m_height);
  // The views draw no full-window background: the clear paints ImGui's window colour.
  const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
  glClearColor(bg.x, bg.y, bg.z, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (m_visible)
    glfwSwapBuffers(m_window);
  else
    glFinish();
}

std::vector<uint8_t> GlWindow::read_rgba() const {
  std::vector<uint8_t> px(static_cast<size_t>(m_width) * m_height * 4);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, m_fbo);
  if (!m_fbo) glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, m_width, m_height, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  // GL rows are bottom-up; PNG rows top-down.
  const size_t stride = static_cast<size_t>(m_width) * 4;
  std::vector<uint8_t> row(stride);
  for (int y = 0; y < m_height / 2; ++y) {
    uint8_t* a = px.data() + y * stride;
    uint8_t* b = px.data() + (m_height - 1 - y) * stride;
    std::memcpy(row.data(), a, stride);
    std::memcpy(a, b, stride);
    std::memcpy(b, row.data(), stride);
  }
  for (size_t i = 3; i < px.size(); i += 4) px[i] = 255;  // opaque
  return px;
}

std::string encode_png(int width, int height, const std::vector<uint8_t>& rgba) {
  if (rgba.size() < static_cast<size_t>(width) * height * 4)
    throw std::invalid_argument("encode_png: fewer pixels than " + std::to_string(width) + "x" + std::to_string(height));
  std::string png;
  auto append = [](void* out, void* data, int size) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, width, height, 4, rgba.data(), width * 4))
    throw std::runtime_error("encode_png: stb_image_write failed");
  return png;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  f.close();
  if (!f) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
}

void write_png(const std::filesystem::path& path, int width, int height, const std::vector<uint8_t>& rgba) {
  write_file(path, encode_png(width, height, rgba));
}

}  // namespace hs::ui
