package fleetsim.web

import com.typesafe.config.ConfigFactory
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.e2e.{Programs, withSystem}
import fleetsim.web.Browser.{js, screenshot, withBrowser}
import org.openqa.selenium.By
import org.openqa.selenium.support.ui.WebDriverWait
import org.scalatest.Outcome
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec
import scala.jdk.CollectionConverters.*

import java.nio.file.Files
import java.time.Duration
import scala.concurrent.Await
import scala.concurrent.duration.*

/** The dashboard and report.html in a real headless Chromium ([[Browser]]). */
class BrowserSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  // Checked before each test rather than in beforeAll, where failing would abort the whole run.
  override def withFixture(test: NoArgTest): Outcome =
    Programs.chromium
    Programs.chromedriver
    super.withFixture(test)

  private val results = Files.createTempDirectory("fleetsim-browser")
  private val config = ConfigFactory.parseString(s"""
    fleetsim.fleet { devices = 60, ramp-rate = 1000 }
    fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s }
    fleetsim.run.results-dir = "$results"
    """).withFallback(ConfigFactory.load()).resolve()

  "The live dashboard" should {
    "load, receive live data within seconds, show the fleet's devices per state, and resize the fleet" in {
      withSystem(config) {
        val run = Await.result(FleetRun.start(RunSettings(config)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 60))
        withBrowser(offline = false) { driver =>
          driver.get(run.dashboard.get.url)
          WebDriverWait(driver, Duration.ofSeconds(20)).until(_ => js(driver, "return window.fleetsim && window.fleetsim.samples") match
            case n: java.lang.Long => n >= 3
            case _ => false)
          eventually {
            assert(driver.findElement(By.id("state-Reporting")).getText == run.metrics.devicesByState(Reporting).toString)
            assert(driver.findElement(By.id("status")).getText == "live")
          }
          val points = js(driver, "return window.fleetsim.charts.devices.chart.data.datasets[2].data.length").asInstanceOf[java.lang.Long]
          assert(points >= 3) // the Reporting line has live points
          // The time axis reads as elapsed time; the joins, all answered during the ramp, leave a gap after it, not a 0.
          assert(js(driver, "return window.fleetsim.charts.devices.chart.scales.x.ticks.map(t => t.label).join(' ')").toString.matches("""0:\d\d( \d+:\d\d)*"""))
          eventually(assert(js(driver, "return window.fleetsim.charts['latency-join'].chart.data.datasets[2].data.some(p => p.y === null)") == java.lang.Boolean.TRUE))
          assert(js(driver, "return window.fleetsim.charts['latency-join'].chart.data.datasets[2].data.every(p => p.y !== 0)") == java.lang.Boolean.TRUE)
          screenshot(driver, "dashboard.png")
          // Its resize control, as a user would use it.
          val size = driver.findElement(By.id("resize-to"))
          eventually(assert(size.getAttribute("value") == "60"))
          size.clear()
          size.sendKeys("40")
          driver.findElement(By.id("resize")).click()
          eventually {
            assert(driver.findElement(By.id("control-said")).getText == """{"planned":60,"target":40}""")
            assert(driver.findElement(By.id("state-Off")).getText == "20")
            assert(driver.findElement(By.id("running")).getText == "40")
          }
          // Its power cut: ten devices Off for two seconds, beside the twenty the resize took out, then back.
          val cutDevices = driver.findElement(By.id("cut-devices"))
          cutDevices.clear()
          cutDevices.sendKeys("0-9")
          val cutFor = driver.findElement(By.id("cut-for"))
          cutFor.clear()
          cutFor.sendKeys("2s")
          driver.findElement(By.id("power-cut")).click()
          eventually(assert(driver.findElement(By.id("control-said")).getText.startsWith("""{"action":"power-cut","devices":10,""")))
          eventually(assert(driver.findElement(By.id("state-Off")).getText == "30"))
          eventually(assert(driver.findElement(By.id("state-Off")).getText == "20" && driver.findElement(By.id("state-Reporting")).getText == "40"))
          assert(js(driver, "return window.fleetsim.actions.map(a => a.name).join()") == "power-cut") // marked on the live charts
        }
        Await.result(run.finish("test over"), 60.seconds)
      }
    }
  }

  "report.html" should {
    "open with no network at all and draw its charts" in {
      val report = results.resolve("report.html")
      assert(Files.exists(report), "the dashboard test's run writes it")
      withBrowser(offline = true) { driver =>
        driver.get(report.toUri.toString)
        WebDriverWait(driver, Duration.ofSeconds(20)).until(_ => js(driver, "return window.fleetsimReport !== undefined") == java.lang.Boolean.TRUE)
        assert(js(driver, "return window.fleetsimReport.samples").asInstanceOf[java.lang.Long] >= 3)
        assert(js(driver, "return Object.keys(Chart.instances).length").asInstanceOf[java.lang.Long] >= 10)
        assert(driver.findElement(By.id("state-Reporting")).getText == "40") // the dashboard test resized its fleet from 60
        assert(driver.findElement(By.id("state-Off")).getText == "20")
        val tables = driver.findElements(By.tagName("table")).asScala.map(_.getText)
        assert(tables.exists(_.contains("heartbeat")), tables)
        assert(tables.exists(t => t.startsWith("action") && t.contains("power-cut")), tables) // the dashboard test's power cut
        assert(js(driver, "return window.fleetsimReport.actions.join()") == "power-cut") // marked on the charts over its span
        screenshot(driver, "report.png")
      }
    }
  }
