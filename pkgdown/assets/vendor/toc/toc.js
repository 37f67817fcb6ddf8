/* The table of contents in the right-hand column of a pkgdown page, built
 * from the page's headings: a replacement for bootstrap-toc 1.0.1, which
 * pkgdown 2.0.7 loads from a CDN and which neither Debian nor npm provides.
 * It offers what pkgdown.js calls, Toc.init({$nav, $scope}), and writes the
 * markup bootstrap-toc writes for Bootstrap 4/5, which pkgdown's CSS and
 * Bootstrap's scrollspy expect: a <nav class="nav nav-pills flex-column">
 * of a.nav-link, one nested nav for the level below the top one. Headings
 * with data-toc-skip are left out; a heading without an id is given one.
 * Written for wispack (tools/site.sh); no code of bootstrap-toc is used. */
(function (global) {
  "use strict";

  function slug(text, taken) {
    var base = text.toLowerCase().replace(/[^\w]+/g, "-").replace(/^-+|-+$/g, "") || "section";
    var id = base;
    for (var i = 1; taken[id] || document.getElementById(id); i++) {
      id = base + "-" + i;
    }
    taken[id] = true;
    return id;
  }

  function headingText(heading) {
    var own = heading.getAttribute("data-toc-text");
    if (own) {
      return own;
    }
    var copy = heading.cloneNode(true);
    var anchors = copy.querySelectorAll("a.anchor");
    for (var i = 0; i < anchors.length; i++) {
      anchors[i].parentNode.removeChild(anchors[i]);
    }
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  function newNav() {
    var nav = document.createElement("nav");
    nav.className = "nav nav-pills flex-column";
    return nav;
  }

  function link(heading, taken) {
    if (!heading.id) {
      heading.id = slug(headingText(heading), taken);
    }
    var a = document.createElement("a");
    a.className = "nav-link";
    a.href = "#" + heading.id;
    a.textContent = headingText(heading);
    return a;
  }

  var Toc = {
    init: function (options) {
      var navs = options.$nav;
      if (!navs || navs.length === 0) {
        return;
      }
      var scope = options.$scope;
      var headings = [];
      (scope && scope.length ? scope.toArray() : []).forEach(function (h) {
        if (!h.hasAttribute("data-toc-skip")) {
          headings.push(h);
        }
      });
      if (headings.length === 0) {
        return;
      }
      var top = Math.min.apply(null, headings.map(function (h) {
        return parseInt(h.tagName.substring(1), 10);
      }));
      var taken = {};
      var root = newNav();
      var nested = null;
      headings.forEach(function (h) {
        var level = parseInt(h.tagName.substring(1), 10);
        if (level === top) {
          root.appendChild(link(h, taken));
          nested = null;
        } else if (level === top + 1) {
          if (!nested) {
            nested = newNav();
            root.appendChild(nested);
          }
          nested.appendChild(link(h, taken));
        }
      });
      navs.each(function () {
        this.appendChild(root.cloneNode(true));
      });
    }
  };

  global.Toc = Toc;
})(window);
