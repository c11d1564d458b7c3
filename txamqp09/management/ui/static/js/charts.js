// Time-series charts drawn by uPlot from the API's sample history: the
// `*_details.samples` lists that msg_rates_age/msg_rates_incr and
// lengths_age/lengths_incr ask for ({sample, timestamp} pairs, newest first).

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { h } from "./dom.js";

/** The ranges a chart can show: label, age and sample spacing (seconds). */
export const RANGES = [
  { label: "Last minute", age: 60, incr: 5 },
  { label: "Last ten minutes", age: 600, incr: 5 },
  { label: "Last hour", age: 3600, incr: 60 },
];

const COLOURS = ["#ed8b00", "#2a9d8f", "#264653", "#e76f51", "#8e44ad", "#1d70b8", "#a0a0a0", "#c0392b"];

/** The API query parameters asking for *range*'s sample history. */
export function historyParams(range) {
  return { msg_rates_age: range.age, msg_rates_incr: range.incr, lengths_age: range.age, lengths_incr: range.incr };
}

/** The samples of *details*, oldest first, as [seconds, value] pairs. */
function samples(details) {
  return ((details && details.samples) || [])
    .map((s) => [s.timestamp / 1000, s.sample])
    .sort((a, b) => a[0] - b[0]);
}

/** Per-second rates between consecutive [seconds, count] samples. */
function rates(points) {
  const result = [];
  for (let i = 1; i < points.length; i += 1) {
    const elapsed = points[i][0] - points[i - 1][0];
    if (elapsed > 0) result.push([points[i][0], Math.max(0, (points[i][1] - points[i - 1][1]) / elapsed)]);
  }
  return result;
}

/**
 * uPlot's data: one x array of the union of the timestamps and one y array
 * per series (null where a series has no point).
 */
function aligned(seriesPoints) {
  const times = Array.from(new Set(seriesPoints.flatMap((points) => points.map(([t]) => t)))).sort((a, b) => a - b);
  return [times, ...seriesPoints.map((points) => {
    const byTime = new Map(points);
    return times.map((t) => (byTime.has(t) ? byTime.get(t) : null));
  })];
}

/**
 * A chart of some series of one API object.
 *
 * @param {string} id the chart's element id.
 * @param {Array} series [{label, key, rate}]: key names the `KEY_details`
 *   field; rate charts the per-second rate of a counter, else the value.
 */
export class SampleChart {
  constructor(id, title, series) {
    this.series = series;
    this.plot = null;
    this.target = h("div", { class: "chart-plot" });
    this.element = h("figure", { class: "chart", id }, h("figcaption", {}, title), this.target);
  }

  /** Draw the samples found in *source* (an object holding `KEY_details`). */
  update(source) {
    const points = this.series.map(({ key, rate }) => {
      const history = samples(source && source[`${key}_details`]);
      return rate ? rates(history) : history;
    });
    const data = aligned(points);
    this.element.dataset.peak = String(Math.max(0, ...data.slice(1).flat().filter((v) => v !== null)));
    if (this.plot) {
      this.plot.setData(data);
      return;
    }
    const width = Math.max(320, (this.target.clientWidth || 600) - 10);
    this.plot = new uPlot({
      width,
      height: 180,
      series: [{}, ...this.series.map(({ label }, i) => ({ label, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: true }))],
      axes: [{}, { size: 60 }],
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
    }, data, this.target);
  }

  /** Free the chart. */
  destroy() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

/** A select of RANGES; *onChange(range)* when another is chosen. */
export function rangeSelect(id, current, onChange) {
  const select = h("select", { id, onchange: () => onChange(RANGES[Number(select.value)]) },
    RANGES.map((range, i) => h("option", { value: i, selected: range === current }, range.label)));
  return select;
}
