package fleetsim.web

import fleetsim.e2e.Programs
import org.openqa.selenium.chrome.{ChromeDriver, ChromeDriverService, ChromeOptions}
import org.openqa.selenium.{JavascriptExecutor, OutputType}

import java.nio.file.{Files, Path, StandardCopyOption}

/** A real headless Chromium (Debian's chromium and chromium-driver) for tests of the dashboard and
  * report.html. Screenshots land in target/screenshots/.
  */
object Browser:
  private lazy val screenshots = Files.createDirectories(Path.of("target", "screenshots"))

  /** A fresh headless Chromium; `offline` also cuts it off from every network address. */
  def withBrowser(offline: Boolean)(test: ChromeDriver => Unit): Unit =
    val options = ChromeOptions()
      .setBinary(Programs.chromium.toFile)
      .addArguments("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1400,1600", s"--user-data-dir=${Files.createTempDirectory("fleetsim-chromium")}")
    if offline then options.addArguments("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9")
    val service = ChromeDriverService.Builder().usingDriverExecutable(Programs.chromedriver.toFile).usingAnyFreePort().build()
    val driver = ChromeDriver(service, options)
    try test(driver)
    finally driver.quit()

  def js(driver: ChromeDriver, script: String): AnyRef = driver.asInstanceOf[JavascriptExecutor].executeScript(script)

  def screenshot(driver: ChromeDriver, name: String): Unit =
    Files.copy(driver.getScreenshotAs(OutputType.FILE).toPath, screenshots.resolve(name), StandardCopyOption.REPLACE_EXISTING)
