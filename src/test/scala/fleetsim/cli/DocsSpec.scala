package fleetsim.cli

import org.scalatest.wordspec.AnyWordSpec

import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import scala.jdk.CollectionConverters.*
import scala.util.Using

/** The docs hold to the code, so that they cannot go stale unnoticed: each command's flags table
  * lists exactly the flags its `--help` prints (through Main.run, in this JVM), every flag the docs
  * name is one of fleetsim's, every relative link leads to a file (and heading) that exists, every
  * BENCHMARKS.md section cited by title is a heading there and every bench/history/ file cited
  * exists, every row of BENCHMARKS.md names the command that measured it, and README's first lines
  * give a newcomer the two commands CI checks.
  */
class DocsSpec extends AnyWordSpec:
  import DocsSpec.*

  /** Each command and the guide whose "## Flags of `command`" table documents it. */
  private val flagTables = Seq("run" -> "docs/running.md", "controller" -> "docs/controller.md", "node" -> "docs/cluster.md",
    "ssh-gateway" -> "docs/ssh.md")

  /** README.md and every guide and ADR under docs/. */
  private val docs: Seq[Path] =
    Using.resource(Files.walk(Path.of("docs")))(_.iterator.asScala.filter(_.toString.endsWith(".md")).toList.sortBy(_.toString)) :+
      Path.of("README.md")

  /** The flags `./fleetsim command --help` prints, without their dashes. */
  private def helpFlags(command: String): Set[String] =
    val (out, err) = (ByteArrayOutputStream(), ByteArrayOutputStream())
    val code = Main.run(List(command, "--help"), PrintStream(out, true, UTF_8), PrintStream(err, true, UTF_8))
    assert(code == 0, s"$command --help: exit $code, ${err.toString(UTF_8)}")
    val flags = HelpRow.findAllMatchIn(out.toString(UTF_8)).map(_.group(1)).toSet
    assert(flags.size > 2, s"$command --help printed no flags:\n${out.toString(UTF_8)}")
    flags

  /** The flags in the first column of the table under `## Flags of `command``. */
  private def tableFlags(file: String, command: String): Set[String] =
    val lines = read(Path.of(file)).linesIterator.toList
    val heading = s"## Flags of `$command`"
    val at = lines.indexOf(heading)
    assert(at >= 0, s"$file has no heading '$heading'")
    val rows = lines.drop(at + 1).dropWhile(!_.startsWith("|")).takeWhile(_.startsWith("|")).drop(2) // header and rule
    assert(rows.nonEmpty, s"$file: no table under '$heading'")
    rows.flatMap(row => Flag.findAllMatchIn(row.split("""(?<!\\)\|""")(1)).map(_.group(1))).toSet

  "The docs" should {
    for (command, file) <- flagTables do
      s"list exactly the flags of `$command --help` in $file" in {
        val help = helpFlags(command)
        val table = tableFlags(file, command)
        def listed(flags: Set[String]) = flags.toSeq.sorted.map("--" + _).mkString(", ")
        val problems = Seq(
          Option.when((help -- table).nonEmpty)(s"lacks ${listed(help -- table)}, which `$command --help` prints"),
          Option.when((table -- help).nonEmpty)(s"has ${listed(table -- help)}, which `$command --help` does not print")).flatten
        if problems.nonEmpty then fail(s"$file's flags table ${problems.mkString("; ")}")
      }

    "name only flags that some command takes" in {
      val known = flagTables.map(_._1).flatMap(helpFlags).toSet
      val stale = for
        file <- docs if !file.startsWith(Path.of("docs", "adr")) // decisions are records of their day
        m <- Flag.findAllMatchIn(read(file))
        name = m.group(1) if !known(name) && !OtherProgramsFlags(name)
      yield s"$file: --$name"
      if stale.nonEmpty then fail(s"no command takes ${stale.distinct.mkString(", ")}")
    }

    "link only to files and headings that exist" in {
      val broken = for
        file <- docs ++ Seq(Benchmarks, History.resolve("README.md"))
        target <- links(read(file)) if !target.matches("^[a-z]+:.*")
        problem <- linkProblem(file, target)
      yield s"$file: ($target) $problem"
      if broken.nonEmpty then fail(broken.distinct.mkString("links that lead nowhere:\n", "\n", ""))
    }

    "cite BENCHMARKS.md by headings it has, and bench/history/ by files that exist" in {
      val headings = read(Benchmarks).linesIterator.filter(_.matches("^#{2,6} .*")).map(_.dropWhile(_ == '#').trim).toSet
      val citing = Seq(Path.of("src", "main"), Path.of("docs"), Path.of("bench")).flatMap(d => Using.resource(Files.walk(d))(_.iterator.asScala.toList))
        .filter(p => Files.isRegularFile(p) && Seq(".scala", ".conf", ".md", ".sh").exists(p.toString.endsWith))
        .filterNot(p => p.startsWith(History) && p != History.resolve("README.md")) ++ // runs are records of their day
        Seq(Path.of("README.md"), Path.of("fleetsim"), Benchmarks)
      val missing = citing.flatMap { file =>
        val text = read(file)
        citations(text).filterNot(headings).map(title => s"$file: \"$title\" is no heading of BENCHMARKS.md") ++
          HistoryFile.findAllMatchIn(text).map(_.group(1)).filterNot(name => Files.isRegularFile(History.resolve(name)))
            .map(name => s"$file: bench/history/$name does not exist")
      }
      if missing.nonEmpty then fail(missing.distinct.mkString("cited, but not there:\n", "\n", ""))
    }

    "name only bench scripts that exist" in {
      val missing = for
        file <- docs.filterNot(_.startsWith(Path.of("docs", "adr"))) :+ Benchmarks // decisions are records of their day
        script <- Script.findAllMatchIn(read(file)).map(_.group(0)) if !Files.isRegularFile(Path.of(script))
      yield s"$file: $script"
      if missing.nonEmpty then fail(missing.distinct.mkString("bench scripts named, but not there:\n", "\n", ""))
    }

    "name in each row of BENCHMARKS.md the command that measured it" in {
      val problems = for
        table <- tables(read(Benchmarks))
        column = cells(table.head).indexOf("command")
        row <- if column < 0 then Seq(table.head) else table.drop(2) // header and rule
        if !cells(row).lift(column).exists(Command.findFirstIn(_).isDefined)
      yield row
      if problems.nonEmpty then
        fail(problems.mkString("BENCHMARKS.md rows without a command (a `bench/...` or `...fleetsim...` span in its column 'command'):\n", "\n", ""))
    }

    "give a newcomer the two commands in README's first 40 lines" in {
      val top = read(Path.of("README.md")).linesIterator.take(40).map(_.trim).toSet
      for command <- NewcomerCommands if !top(command) do fail(s"README.md's first 40 lines lack `$command`")
    }
  }

object DocsSpec:
  /** What a newcomer types on a fresh machine: a real fleet, and the tests. CI runs the second. */
  val NewcomerCommands: Seq[String] = Seq("./fleetsim run --devices 1000 --duration 60s", "./test")

  /** Flags the docs quote from other programs (`curl --connect-timeout`, which a profile mirrors). */
  private val OtherProgramsFlags = Set("connect-timeout", "max-time")

  /** A row of `--help`: two spaces, the flag. Its second line (env, config) starts with spaces only. */
  private val HelpRow = """(?m)^  --([a-z][a-z0-9-]*)""".r
  private val Flag = """(?<![\w-])--([a-z][a-z0-9-]*)""".r

  private def read(file: Path): String = Files.readString(file, UTF_8)

  /** Today's figures, and every run they come from. */
  private val Benchmarks = Path.of("BENCHMARKS.md")
  private val History = Path.of("bench", "history")
  /** A history file named: a date and what was measured, or the list of them. */
  private val HistoryFile = """bench/history/((?:\d{4}-\d{2}-\d{2}-[\w.-]+|README)\.md)""".r
  /** A bench script named. */
  private val Script = """bench/[\w.-]+\.sh""".r
  /** A command in a row: a code span running a bench script or fleetsim. */
  private val Command = """`[^`]*(?:bench/|fleetsim)[^`]*`""".r

  /** The tables of a Markdown text, each as its lines: header, rule, rows. */
  private def tables(text: String): Seq[Seq[String]] =
    val lines = text.linesIterator.toVector
    lines.indices.filter(i => lines(i).startsWith("|") && (i == 0 || !lines(i - 1).startsWith("|")))
      .map(i => lines.drop(i).takeWhile(_.startsWith("|")))

  /** A table row's cells, trimmed. */
  private def cells(row: String): Seq[String] = row.split("""(?<!\\)\|""").toSeq.drop(1).map(_.trim)

  /** Markdown links' targets, outside code blocks and code spans. */
  private def links(text: String): Seq[String] =
    val prose = text.replaceAll("(?s)```.*?```", "").linesIterator.filterNot(_.startsWith("    ")).mkString("\n").replaceAll("`[^`\n]*`", "")
    """\]\(([^)\s]+)\)""".r.findAllMatchIn(prose).map(_.group(1)).toSeq

  /** Why a relative link from `file` leads nowhere: a missing file, or a heading its file lacks. */
  private def linkProblem(file: Path, target: String): Option[String] =
    val (path, anchor) = target.split("#", 2) match
      case Array(p, a) => (p, Some(a))
      case Array(p) => (p, None)
    val resolved = if path.isEmpty then file else file.toAbsolutePath.getParent.resolve(path).normalize
    if !Files.exists(resolved) then Some("no such file")
    else anchor.filter(_ => resolved.toString.endsWith(".md")).filterNot(anchors(read(resolved))).map(a => s"no heading with anchor #$a")

  /** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as dashes,
    * a repeated one numbered.
    */
  private def anchors(text: String): Set[String] =
    val headings = text.replaceAll("(?s)```.*?```", "").linesIterator.filter(_.matches("^#{1,6} .*")).map(_.dropWhile(_ == '#').trim)
    val slugs = headings.map(_.toLowerCase.replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-')).toList
    slugs.zipWithIndex.map((s, i) => if slugs.take(i).contains(s) then s"$s-${slugs.take(i).count(_ == s)}" else s).toSet

  /** Titles cited in double quotes after BENCHMARKS.md and a comma (one, or two joined by "and"),
    * with the comment leaders of wrapped lines taken out.
    */
  private def citations(text: String): Seq[String] =
    val joined = text.replaceAll("""\s*\n\s*(?:\*|//|#)?\s*""", " ")
    """BENCHMARKS\.md,?\s*((?:"[^"]+"(?:\s*(?:,|and)\s*(?="))?)+)""".r.findAllMatchIn(joined)
      .flatMap(m => "\"([^\"]+)\"".r.findAllMatchIn(m.group(1)).map(_.group(1).trim)).toSeq
