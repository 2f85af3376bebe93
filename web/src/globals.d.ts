// What the page's scripts find as globals: uPlot, loaded by index.html from web/vendor.
// Typed loosely: the page uses a handful of its calls.
declare const uPlot: any;
