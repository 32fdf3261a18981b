// Forms that change something hard to undo carry data-confirm: ask before sending them.
document.addEventListener("submit", function (event) {
  const text = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (text && !window.confirm(text)) event.preventDefault();
});
