package fleetsim.profile

import com.typesafe.config.{Config, ConfigList, ConfigObject, ConfigValue}
import fleetsim.Csv
import fleetsim.HoconChecks.inFileOrder
import fleetsim.fleet.FleetSettings

import java.nio.file.{Files, Path}
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import scala.collection.mutable
import scala.jdk.CollectionConverters.*

/** Who a profile's devices are: their number and MAC, its constants, its identity.csv's rows, its
  * weighted picks and fields built from others (`identity { ... }`), and the kept values a row seeds.
  */
private[profile] final class Identity(root: Config, fleet: FleetSettings, base: Option[Path], outline: Outline, slots: Slots):
  import ProfileChecks.*

  /** Values every template may use as they are. */
  private val constants: Map[String, String] =
    if !root.hasPath("constants") then Map.empty
    else blockAt(root, "constants", "constants").asScala.map((k, v) => k -> String.valueOf(v.unwrapped)).toMap

  private val csv: Option[Csv] = Option.when(root.hasPath("identity.csv"))(IdentityCsv.read(root.getValue("identity.csv"), base, fleet.devices, fail))

  private val keptNames = outline.keptNames

  /** The identity.csv columns that seed kept values (a known device's id and key), by column number. */
  val seededColumns: Seq[(String, Int)] = csv.toSeq.flatMap(_.columns.zipWithIndex.filter((c, _) => keptNames(c)))

  /** How each identity field stands in when a JSON body is checked ([[JsonBody]]): `number` as a
    * number, `mac` as text, a constant as itself, a pick or CSV column as the value of it most
    * likely to break the body, a field built from others as it renders from theirs.
    */
  private val identitySamples = mutable.LinkedHashMap.empty[String, String]

  /** Identity fields as a device's number renders them, with a random stable per device: the
    * profile's, and an MQTT device's clientId.
    */
  val ownFields: Map[String, Variable[IdentityScope]] =
    val fields = mutable.LinkedHashMap.empty[String, Variable[IdentityScope]]
    def templated(name: String, text: String, at: ConfigValue, what: String): Unit =
      val template = compile(text, at, fields.toMap, what)
      fields(name) = (s, out) => template.render(s, out)
      identitySamples(name) = JsonBody.sample(text, identitySamples.toMap, Escape.None)
    fields("number") = (s, out) => out.append(s.number)
    identitySamples("number") = JsonBody.Number
    fields("mac") = (s, out) => fleet.appendMac(s.number, out)
    identitySamples("mac") = JsonBody.Text
    for c <- csv.toSeq; (column, i) <- c.columns.zipWithIndex if !keptNames(column) do
      fields(column) = (s, out) => out.append(c.rows(s.number)(i))
      identitySamples(column) = JsonBody.sampleOf(c.rows.map(_(i)))
    for (k, v) <- constants do
      fields(k) = (_, out) => out.append(v)
      identitySamples(k) = v
    if root.hasPath("identity") then
      val block = blockAt(root, "identity", "identity")
      for key <- inFileOrder(block) if key != "csv" do
        block.get(key) match
          case o: ConfigObject if o.get("pick").isInstanceOf[ConfigList] =>
            for (field, column, values) <- rowPick(key, o) do
              fields(field) = column
              identitySamples(field) = JsonBody.sampleOf(values)
          case o: ConfigObject =>
            fields(key) = weightedPick(key, o)
            identitySamples(key) = JsonBody.sampleOf(o.toConfig.getObject("pick").keySet.asScala.toSeq.sorted)
          case v => templated(key, String.valueOf(v.unwrapped), v, s"identity.$key")
    for t <- outline.section.identityTemplates(root) do templated(t.name, t.text, t.at, t.what)
    fields.toMap

  /** How each identity field stands in when a JSON body is checked. */
  val samples: Map[String, String] = identitySamples.toMap

  /** Identity fields, as a call's templates read them. */
  val fields: Map[String, Variable[CallScope]] =
    val direct: Map[String, Variable[CallScope]] = Map( // on every call's path: no identity scope for these
      "number" -> ((s, out) => out.append(s.device.number)),
      "mac" -> ((s, out) => fleet.appendMac(s.device.number, out)))
    ownFields.map { (name, field) =>
      val onCall: Variable[CallScope] = (s, out) => field.appendTo(IdentityScope(s.device.number), out)
      name -> direct.getOrElse(name, onCall)
    }

  /** A template of identity fields alone, rendered per device without a call (an MQTT device's username). */
  def template(text: String, at: ConfigValue, what: String): Template[IdentityScope] = compile(text, at, ownFields, what)

  private def compile(text: String, at: ConfigValue, variables: Map[String, Variable[IdentityScope]], what: String): Template[IdentityScope] =
    Template.compile[IdentityScope](text, variables.get, Escape.None, slots, variables.keys).fold(e => fail(at, s"$what: $e"), t => t)

  /** A weighted pick of a row of several fields (a model and its SoC): one draw a device for the
    * whole row, stable for that device; each field a variable of its own, with every value it may take.
    */
  private def rowPick(name: String, block: ConfigObject): Seq[(String, Variable[IdentityScope], Seq[String])] =
    keysOf(block, Set("pick"), s"identity.$name")
    val list = block.get("pick").asInstanceOf[ConfigList].asScala.toSeq
    if list.isEmpty then fail(block, s"identity.$name.pick needs at least one row, like [ { model = \"AG-200\", soc = \"MT7621\", weight = 3 } ]")
    val rows = list.map {
      case o: ConfigObject => o
      case v => fail(v, s"identity.$name.pick: each row is a block of fields and a weight, like { model = \"AG-200\", soc = \"MT7621\", weight = 3 }")
    }
    val names = rows.head.keySet.asScala.toSeq.filter(_ != "weight").sortBy(k => (rows.head.get(k).origin.lineNumber, k))
    if names.isEmpty then fail(rows.head, s"identity.$name.pick: a row needs at least one field besides its weight")
    for n <- names if !n.matches("[A-Za-z_][A-Za-z0-9_]*") do fail(rows.head.get(n), s"identity.$name.pick: '$n' is not a name templates can use (letters, digits, _)")
    val weights = rows.map { row =>
      val own = row.keySet.asScala.toSet - "weight"
      if own != names.toSet then fail(row, s"identity.$name.pick: every row has the same fields (${names.mkString(", ")}); this one has ${own.toSeq.sorted.mkString(", ")}")
      Option(row.get("weight")).fold(1.0) { w =>
        w.unwrapped match
          case n: Number if n.doubleValue > 0 => n.doubleValue
          case _ => fail(w, s"identity.$name.pick: a weight must be a number above 0")
      }
    }
    val choose = chooser(weights)
    val salt = name.hashCode.toLong * 0x9e3779b97f4a7c15L
    // Its own random, not the device's identity random: the row must not shift when other picks are added.
    def rowOf(number: Int): Int = choose(SplittableRandom(0xc0ffeeL ^ salt ^ (number.toLong * 0xbf58476d1ce4e5b9L)).nextDouble())
    names.map { field =>
      val values = rows.map(r => String.valueOf(r.get(field).unwrapped)).toArray
      (field, ((s, out) => out.append(values(rowOf(s.number)))): Variable[IdentityScope], values.toSeq.distinct.sorted)
    }

  /** A weighted pick of one value: `pick { "A" = 3, "B" = 1 }`, drawn from the device's identity random. */
  private def weightedPick(name: String, o: ConfigObject): Variable[IdentityScope] =
    keysOf(o, Set("pick"), s"identity.$name")
    val weights = blockAt(o.toConfig, "pick", s"identity.$name.pick").asScala.toSeq.map { (choice, w) =>
      val weight = w.unwrapped match
        case n: Number if n.doubleValue > 0 => n.doubleValue
        case _ => fail(w, s"identity.$name.pick: the weight of '$choice' must be a number above 0")
      choice -> weight
    }.sortBy(_._1)
    if weights.isEmpty then fail(o, s"identity.$name.pick needs at least one choice, like { \"A\" = 3, \"B\" = 1 }")
    val choose = chooser(weights.map(_._2))
    val choices = weights.map(_._1).toArray
    (s, out) => out.append(choices(choose(s.random.nextDouble())))

  /** The index a uniform draw from [0, 1) picks, each index as likely as its weight. */
  private def chooser(weights: Seq[Double]): Double => Int =
    val total = weights.sum
    val cumulative = weights.scanLeft(0.0)(_ + _).tail.map(_ / total).toArray
    u =>
      var i = 0
      while i < cumulative.length - 1 && u >= cumulative(i) do i += 1
      i

  /** The kept values identity.csv seeds, each row checked now: a number must be one.
    *
    * @param slotOf where a kept value lives, by its name
    * @param known the register that says a device's row holds them all
    */
  def seeds(slotOf: String => Slot, known: => LateRegister): Seeds =
    if seededColumns.isEmpty then Seeds.None
    else
      val rows = csv.get.rows
      val slots = seededColumns.map((column, _) => slotOf(column)).toIndexedSeq
      for ((column, i), slot) <- seededColumns.zip(slots) if slot.number; (row, n) <- rows.zipWithIndex.take(fleet.devices) do
        if row(i).nonEmpty && ProfileValues.parseLong(row(i)) == null then
          fail(root.getValue("identity.csv"), s"identity.csv: row ${n + 2}, column $column: '${row(i)}' is not a number, and $column is kept as one (say type = text where it is kept, or fix the row)")
      val columns = seededColumns.map(_._2).toIndexedSeq
      Seeds(slots, n => columns.map(rows(n)(_)), known)

/** The identity fields' view of a device: its number, and a random that is the same every time
  * for that device, so that what it picks it keeps.
  */
final class IdentityScope(val number: Int) extends Scope:
  lazy val random: RandomGenerator = SplittableRandom(0x5eed_f1ee_75L ^ (number.toLong * 0x9e3779b97f4a7c15L))
  def walk(slot: Int): Double = 0
  def setWalk(slot: Int, value: Double): Unit = ()

/** The profile's `identity.csv`: one device a row, its columns names templates use. */
object IdentityCsv:
  def read(at: ConfigValue, base: Option[Path], devices: Int, fail: (ConfigValue, String) => Nothing): Csv =
    val name = String.valueOf(at.unwrapped)
    val file = base.fold(Path.of(name))(_.resolve(name))
    if !Files.isRegularFile(file) then fail(at, s"identity.csv: no such file $file (a path is taken from the profile's folder)")
    val csv = Csv.read(file).fold(problem => fail(at, s"identity.csv: $problem"), identity)
    for c <- csv.columns if !c.matches("[A-Za-z_][A-Za-z0-9_]*") do
      fail(at, s"identity.csv: column '$c' of $file is not a name templates can use (letters, digits, _)")
    if csv.rows.size < devices then
      fail(at, s"identity.csv: $file has ${csv.rows.size} devices' rows but the fleet has $devices: add rows, or run fewer devices")
    csv
